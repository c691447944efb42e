package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// The names lookups ask for are in benchDomain, whose every name has
// benchAddrs (the zone's wildcard), so that each run asks for a name of
// its own (benchName), which the proxy told the agent of in no run
// before; dnsRules allow them.
const benchDomain = "bench.test."

var benchAddrs = []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}

// benchName is the name of the n-th run's lookups.
func benchName(n int) string { return fmt.Sprintf("api-%d.%s", n, benchDomain) }

// zone is an authoritative server's data: the A records of each name,
// "*." and a domain for its every name, and the TTL of the records, which
// a run may change.
type zone struct {
	names map[string][]netip.Addr
	ttl   atomic.Uint32
}

func newZone(names map[string][]netip.Addr, ttl uint32) *zone {
	z := &zone{names: names}
	z.ttl.Store(ttl)
	return z
}

// benchTTL is the TTL of the zone's records but in the runs that change it.
const benchTTL = 60

func benchZone() *zone {
	return newZone(map[string][]netip.Addr{
		"*." + benchDomain: benchAddrs,
		"www.example.com.": {netip.MustParseAddr("192.0.2.3")},
	}, benchTTL)
}

// answer is z's answer to query: the A records of the name asked for,
// NXDOMAIN for a name it does not hold; nil for what is no query.
func (z *zone) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := q.Name.String()
	addrs, ok := z.names[name]
	if _, parent, found := strings.Cut(name, "."); !ok && found {
		addrs, ok = z.names["*."+parent]
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: z.ttl.Load()}
			if b.AResource(rr, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// serveDNS answers from z on UDP port of addr in ns until closed.
func serveDNS(ns string, addr netip.Addr, port int, z *zone) (io.Closer, error) {
	pc, err := netnamespace.ListenPacket(ns, "udp4", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		return nil, fmt.Errorf("listen for DNS: %w", err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if a := z.answer(buf[:n]); a != nil {
				pc.WriteTo(a, from)
			}
		}
	}()
	return pc, nil
}

// resolver looks name up as a stub resolver does: a new UDP socket for
// each query, in the client's namespace.
type resolver struct {
	ns     string
	server netip.AddrPort
	query  []byte
	want   int // A records in each answer
	buf    []byte
	id     uint16
}

func newResolver(ns string, server netip.Addr, name string, want int) *resolver {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	return &resolver{ns: ns, server: netip.AddrPortFrom(server, dnsPort), query: q, want: want, buf: make([]byte, 1500)}
}

// lookup makes one lookup and returns its time, from the query sent to
// the answer read (the socket is opened before).
func (r *resolver) lookup() (time.Duration, error) {
	c, err := netnamespace.DialContext(context.Background(), r.ns, "udp4", r.server.String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r.id++
	binary.BigEndian.PutUint16(r.query, r.id)
	c.SetDeadline(time.Now().Add(dptest.ReplyWait))
	start := time.Now()
	if _, err := c.Write(r.query); err != nil {
		return 0, err
	}
	n, err := c.Read(r.buf)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	return took, r.check(r.buf[:n])
}

// check says whether answer is the answer to the last query, with the
// A records the zone holds.
func (r *resolver) check(answer []byte) error {
	var p dnsmessage.Parser
	h, err := p.Start(answer)
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if h.ID != r.id || h.RCode != dnsmessage.RCodeSuccess {
		return fmt.Errorf("answer %d %s to query %d, want success", h.ID, h.RCode, r.id)
	}
	if err := p.SkipAllQuestions(); err != nil {
		return err
	}
	answers, err := p.AllAnswers()
	if err != nil {
		return err
	}
	if len(answers) != r.want {
		return fmt.Errorf("%d records in the answer, want %d", len(answers), r.want)
	}
	return nil
}

// dnsLatency is each lookup's time, lookups one after another for d.
func dnsLatency(r *resolver, d time.Duration) ([]time.Duration, error) {
	var lat []time.Duration
	for t0 := time.Now(); time.Since(t0) < d; {
		took, err := r.lookup()
		if err != nil {
			return lat, fmt.Errorf("lookup %d: %w", len(lat)+1, err)
		}
		lat = append(lat, took)
	}
	return lat, nil
}
