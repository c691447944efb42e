package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
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
			if err := p.answers.send(to, from, answer); err != nil {
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
	pt := p.partyOf(c, spec.Egress, &rec, p.remoteOf(spec.Egress, from, to))
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
		p.learn(ctx, c, pt.ep, learned)
	}
	p.cfg.Record(resp)
	return answer
}

// learn tells the agent of an allowed answer's addresses and waits for
// the datapath to allow them (LearnWait at most), unless it told the
// agent as much for ep under the same policy less than half their TTL
// ago: the agent keeps them for their TTL at least, so they are allowed
// still, and a name looked up again and again costs the round trip once
// in half its TTL. A new policy (of a new endpoint, or of an agent that
// restarted) tells again.
func (p *Proxy) learn(ctx context.Context, c *compiled, ep *Endpoint, l fqdn.Lookup) {
	k := toldKey{ep: ep.ID, addr: ep.IPv4, name: l.Name}
	if p.told.known(c, k, l) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.LearnWait)
	defer cancel()
	if err := p.cfg.Learn(ctx, l); err != nil {
		p.cfg.Log.Debug("DNS proxy: learned addresses not confirmed in time", "name", l.Name, "error", err)
		return
	}
	p.told.add(c, k, l)
}

// toldAnswers are the answers learn told the agent of under one policy
// (its run and revision), each until half its TTL passed.
type toldAnswers struct {
	mu            sync.Mutex
	run, revision uint64
	m             map[toldKey]toldAnswer
}

type toldKey struct {
	ep   uint16
	addr netip.Addr
	name string
}

type toldAnswer struct {
	ips     []netip.Addr
	targets []string
	until   time.Time
}

// maxTold bounds the answers remembered: past it, learn tells the agent
// of each new one until some expire.
const maxTold = 1 << 14

// known says whether the agent was told of l's addresses and CNAME
// targets (all of them) for k under c's policy, and keeps them past
// l's time.
func (t *toldAnswers) known(c *compiled, k toldKey, l fqdn.Lookup) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.m[k]
	return ok && t.run == c.run && t.revision == c.revision && l.Time.Before(a.until) &&
		!slices.ContainsFunc(l.IPs, func(ip netip.Addr) bool { return !slices.Contains(a.ips, ip) }) &&
		!slices.ContainsFunc(l.Targets, func(tg fqdn.Target) bool { return !slices.Contains(a.targets, tg.Name) })
}

func (t *toldAnswers) add(c *compiled, k toldKey, l fqdn.Lookup) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || t.run != c.run || t.revision != c.revision {
		t.run, t.revision, t.m = c.run, c.revision, map[toldKey]toldAnswer{}
	}
	if len(t.m) >= maxTold {
		now := time.Now()
		maps.DeleteFunc(t.m, func(_ toldKey, a toldAnswer) bool { return !now.Before(a.until) })
		if len(t.m) >= maxTold {
			return
		}
	}
	a := toldAnswer{ips: l.IPs, until: l.Time.Add(time.Duration(l.TTL) * time.Second / 2)}
	for _, tg := range l.Targets {
		a.targets = append(a.targets, tg.Name)
	}
	t.m[k] = a
}

// forward asks the server at to, from the endpoint's address, marked.
// Each query has a socket of its own: the upstream's tuple is the
// datapath's for as long as the socket lives, and a query of the pod's
// own that happens to take the same port drops meanwhile (bpf/lib/proxy.h,
// proxy_owns).
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
	buf := datagrams.Get().(*[]byte)
	defer datagrams.Put(buf)
	n, err := c.Read(*buf)
	if err != nil {
		return nil, err
	}
	return slices.Clone((*buf)[:n]), nil
}

// datagrams are buffers for the largest datagram, which answers are read
// into: an answer is rarely more than a few hundred bytes.
var datagrams = sync.Pool{New: func() any {
	b := make([]byte, maxDNSMessage)
	return &b
}}

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
