package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// maxDNSMessage is the largest DNS message: over TCP a length of 16 bits.
const maxDNSMessage = 65535

func (p *Proxy) serveDNSUDP(ctx context.Context, c *net.UDPConn) error {
	buf := make([]byte, maxDNSMessage)
	for {
		n, from, to, err := tproxy.ReadFrom(c, buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			p.cfg.Log.Debug("DNS proxy: read", "error", err)
			continue
		}
		q := slices.Clone(buf[:n])
		go func() {
			answer := p.resolve(ctx, q, from, to, spec.ProtoUDP)
			if answer == nil {
				return
			}
			if err := p.cfg.Sockets.SendFrom(to, from, answer); err != nil {
				p.cfg.Log.Debug("DNS proxy: answer", "error", err)
			}
		}()
	}
}

// serveDNSTCP answers the queries of one TCP connection in turn.
func (p *Proxy) serveDNSTCP(ctx context.Context, c net.Conn) {
	defer c.Close()
	from, to := addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	for {
		q, err := readTCPMessage(c)
		if err != nil {
			return
		}
		answer := p.resolve(ctx, q, from, to, spec.ProtoTCP)
		if answer == nil || writeTCPMessage(c, answer) != nil {
			return
		}
	}
}

func readTCPMessage(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeTCPMessage(w io.Writer, b []byte) error {
	_, err := w.Write(binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(b)), uint16(len(b))))
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// resolve judges one query of the endpoint at from to the server at to
// and returns the answer for the endpoint: the server's, or REFUSED for
// a name the rules do not allow, or SERVFAIL when the server does not
// answer. nil: the query is no DNS message and gets no answer.
func (p *Proxy) resolve(ctx context.Context, query []byte, from, to netip.AddrPort, proto uint8) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(query)
	if err != nil {
		return nil
	}
	q, err := parser.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(q.Name.String())
	c := p.state.get()
	rec := accesslog.Record{Time: time.Now(), Type: accesslog.Request, Src: from, Dst: to, Protocol: proto,
		DNS: &accesslog.DNSRecord{Query: name, QTypes: []string{typeName(q.Type)}}}
	pt := p.partyOf(c, spec.Egress, &rec)
	var allows []*policy.L7Allow
	if pt.ep != nil {
		allows = c.allows(pt.ep, spec.Egress, proto, to.Port(), pt.remote)
	}
	// A local server whose ingress rules are HTTP's: no DNS query of
	// it passes them.
	if pt.ep == nil || pt.server != nil || !c.allowsName(allows, name) {
		rec.Verdict = accesslog.Denied
		p.cfg.Record(rec)
		return reply(h, q, dnsmessage.RCodeRefused)
	}
	rec.Verdict = accesslog.Forwarded
	p.cfg.Record(rec)

	answer, err := p.forward(ctx, query, from.Addr(), to, pt.mark, proto)
	resp := rec.Reply()
	resp.Time = time.Now()
	resp.Latency = resp.Time.Sub(rec.Time)
	if err != nil {
		p.cfg.Log.Debug("DNS proxy: upstream", "server", to, "error", err)
		resp.Verdict = accesslog.Errored
		resp.DNS = &accesslog.DNSRecord{Query: name, QTypes: rec.DNS.QTypes, RCode: uint16(dnsmessage.RCodeServerFailure)}
		p.cfg.Record(resp)
		return reply(h, q, dnsmessage.RCodeServerFailure)
	}
	var targets []fqdn.Target
	resp.DNS, targets = answerRecord(answer, name, rec.DNS.QTypes)
	if resp.DNS.RCode == uint16(dnsmessage.RCodeSuccess) && len(resp.DNS.IPs) > 0 {
		learned := fqdn.Lookup{Endpoint: pt.ep.ID, Name: fqdn.Normalize(name), IPs: resp.DNS.IPs, TTL: resp.DNS.TTL, Time: resp.Time}
		// A CNAME target is learned as a name of the addresses only where
		// the endpoint's DNS rules would let it ask for the target itself:
		// the answer then teaches nothing that asking could not, and a
		// toFQDNs rule for the target selects them. (Cilium learns the
		// name asked alone.)
		for _, t := range targets {
			if c.allowsName(allows, t.Name) {
				learned.Targets = append(learned.Targets, t)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, p.cfg.LearnWait)
		if err := p.cfg.Learn(lctx, learned); err != nil {
			p.cfg.Log.Debug("DNS proxy: learned addresses not confirmed in time", "name", name, "error", err)
		}
		cancel()
	}
	p.cfg.Record(resp)
	return answer
}

// forward asks the server at to, from the endpoint's address, marked.
func (p *Proxy) forward(ctx context.Context, query []byte, src netip.Addr, to netip.AddrPort, mark uint32, proto uint8) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.UpstreamTimeout)
	defer cancel()
	network := "udp4"
	if proto == spec.ProtoTCP {
		network = "tcp4"
	}
	c, err := p.cfg.Sockets.Dial(ctx, network, src, to, mark)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if proto == spec.ProtoTCP {
		if err := writeTCPMessage(c, query); err != nil {
			return nil, err
		}
		return readTCPMessage(c)
	}
	if _, err := c.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, maxDNSMessage)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// reply is an answer of rcode alone to the query h, q.
func reply(h dnsmessage.Header, q dnsmessage.Question, rcode dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, CheckingDisabled: h.CheckingDisabled, RCode: rcode})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil {
		return nil
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// answerRecord reads what an answer says of name: its code, the
// addresses of name (those of the CNAME chain it leads to), how long the
// answer vouches for them (the smallest TTL of the chain's records: a
// CNAME that expires takes name's addresses with it, as Cilium counts),
// and the chain's targets, each with the TTL of its own part of it.
// Records outside the chain are left out, in whatever order they come.
func answerRecord(answer []byte, name string, qtypes []string) (*accesslog.DNSRecord, []fqdn.Target) {
	rec := &accesslog.DNSRecord{Query: name, QTypes: qtypes}
	var parser dnsmessage.Parser
	h, err := parser.Start(answer)
	if err != nil {
		rec.RCode = uint16(dnsmessage.RCodeFormatError)
		return rec, nil
	}
	rec.RCode = uint16(h.RCode)
	if parser.SkipAllQuestions() != nil {
		return rec, nil
	}
	type address struct {
		owner string
		ip    netip.Addr
		ttl   uint32
	}
	type alias struct {
		target string
		ttl    uint32
	}
	var addrs []address
	aliases := map[string]alias{} // by owner: a name has one CNAME
	for {
		rh, err := parser.AnswerHeader()
		if err != nil {
			break
		}
		owner := strings.ToLower(rh.Name.String())
		if !slices.Contains(rec.RRTypes, typeName(rh.Type)) {
			rec.RRTypes = append(rec.RRTypes, typeName(rh.Type))
		}
		switch rh.Type {
		case dnsmessage.TypeA:
			r, err := parser.AResource()
			if err != nil {
				return rec, nil
			}
			addrs = append(addrs, address{owner, netip.AddrFrom4(r.A), rh.TTL})
		case dnsmessage.TypeCNAME:
			r, err := parser.CNAMEResource()
			if err != nil {
				return rec, nil
			}
			if _, ok := aliases[owner]; !ok {
				aliases[owner] = alias{strings.ToLower(r.CNAME.String()), rh.TTL}
			}
		default:
			if parser.SkipAnswer() != nil {
				return rec, nil
			}
		}
	}

	// The chain from name, a loop cut where it comes back.
	chain, at := []string{name}, map[string]int{name: 0}
	var hopTTL []uint32 // of the CNAME from chain[i] to chain[i+1]
	for {
		a, ok := aliases[chain[len(chain)-1]]
		if _, seen := at[a.target]; !ok || seen {
			break
		}
		at[a.target] = len(chain)
		chain, hopTTL = append(chain, a.target), append(hopTTL, a.ttl)
	}
	rec.CNAMEs = chain[1:]
	const none = ^uint32(0)
	addrTTL := slices.Repeat([]uint32{none}, len(chain)) // the smallest of each name's addresses
	first := len(chain)                                  // the first name in the chain with addresses
	for _, a := range addrs {
		i, ok := at[a.owner]
		if !ok {
			continue
		}
		addrTTL[i], first = min(addrTTL[i], a.ttl), min(first, i)
		if !slices.Contains(rec.IPs, a.ip) {
			rec.IPs = append(rec.IPs, a.ip)
		}
	}
	if len(rec.IPs) == 0 {
		return rec, nil
	}
	// From the chain's end back: each name's TTL is the smallest of the
	// records from it on. A target after the first name with addresses of
	// its own (an answer no server should give) would be given addresses
	// that are not its: it is left out.
	ttls := make([]uint32, len(chain))
	ttl := none
	for i := len(chain) - 1; i >= 0; i-- {
		ttl = min(ttl, addrTTL[i])
		if i < len(hopTTL) {
			ttl = min(ttl, hopTTL[i])
		}
		ttls[i] = ttl
	}
	rec.TTL = ttls[0]
	var targets []fqdn.Target
	for i := 1; i <= first && i < len(chain); i++ {
		targets = append(targets, fqdn.Target{Name: chain[i], TTL: ttls[i]})
	}
	return rec, targets
}

func typeName(t dnsmessage.Type) string {
	return strings.TrimPrefix(t.String(), "Type")
}
