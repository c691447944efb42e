package world

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSTTL is the TTL of every record the world's DNS answers with.
const DNSTTL = 30

// Zone is what the world's DNS server holds: the addresses of its names,
// and aliases (CNAMEs) to other names. Names are lower case, without the
// trailing dot.
type Zone struct {
	Hosts   map[string]netip.Addr
	Aliases map[string]string
}

// DNSServer is the world's authoritative DNS server, over UDP: what a real
// cluster's DNS would forward the world's zones to.
type DNSServer struct {
	conn net.PacketConn
	zone Zone
}

// ListenDNS opens the server's socket at addr.
func ListenDNS(addr netip.AddrPort, zone Zone) (*DNSServer, error) {
	for name, target := range zone.Aliases {
		if _, ok := zone.Hosts[target]; !ok {
			return nil, fmt.Errorf("world: alias %s: no host %s", name, target)
		}
	}
	conn, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	return &DNSServer{conn: conn, zone: zone}, nil
}

// Addr is where the server listens.
func (s *DNSServer) Addr() netip.AddrPort { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close closes the socket, which ends Serve.
func (s *DNSServer) Close() error { return s.conn.Close() }

// Serve answers queries until the socket is closed.
func (s *DNSServer) Serve(log *slog.Logger) error {
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		resp, err := s.zone.answer(buf[:n])
		if err != nil {
			log.Debug("world DNS: a query skipped", "from", from, "error", err)
			continue
		}
		if _, err := s.conn.WriteTo(resp, from); err != nil {
			log.Warn("world DNS: an answer not sent", "to", from, "error", err)
		}
	}
}

// answer is the response to query: for a host, its address (an A query)
// or nothing (another type); for an alias, its CNAME and then the
// target's; NXDOMAIN for a name the zone does not hold.
func (z Zone) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	target, alias := z.Aliases[name]
	if !alias {
		target = name
	}
	addr, ok := z.Hosts[target]
	rcode := dnsmessage.RCodeSuccess
	if !ok {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RCode: rcode})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rr := func(n string, t dnsmessage.Type) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(n + "."), Type: t, Class: dnsmessage.ClassINET, TTL: DNSTTL}
	}
	if alias {
		if err := b.CNAMEResource(rr(name, dnsmessage.TypeCNAME), dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(target + ".")}); err != nil {
			return nil, err
		}
	}
	if ok && q.Type == dnsmessage.TypeA && addr.Is4() {
		if err := b.AResource(rr(target, dnsmessage.TypeA), dnsmessage.AResource{A: addr.As4()}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}
