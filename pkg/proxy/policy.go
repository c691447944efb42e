// Package proxy is the layer-7 proxy: the DNS and HTTP proxies that the
// datapath sends the connections of allows with layer-7 rules to
// (bpf/lib/proxy.h). It judges each DNS query and HTTP request by the
// rules of the endpoint it acts for, forwards what they allow from that
// endpoint's address, answers the rest as Cilium does (DNS REFUSED, HTTP
// 403), learns the addresses of allowed DNS answers for toFQDNs, and
// reports every request and response as a layer-7 record.
//
// The proxy runs apart from the agent, so that an agent restart loses no
// lookup and no request: it keeps the last Policy the agent gave it.
package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/l7"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// Policy is what the agent tells the proxy: the local endpoints with
// their layer-7 rules. It is JSON, so that it can be kept in a file that
// outlives either process.
type Policy struct {
	// Revision grows with every policy the agent computes.
	Revision uint64 `json:"revision"`
	// Run names the agent's run that wrote the policy, whose revisions
	// start again: the proxy's Ack names it back, so that an agent takes
	// no acknowledgement of an earlier run's policy for one of its own.
	// 0: the agent takes none.
	Run       uint64     `json:"run,omitempty"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is a local endpoint and its ports that go through the proxy.
type Endpoint struct {
	ID       uint16                   `json:"id"`
	Identity identity.NumericIdentity `json:"identity"`
	IPv4     netip.Addr               `json:"ipv4"`
	Ports    []policy.L7Port          `json:"ports,omitempty"`
}

// compiled is a Policy ready to judge with: endpoints by address, HTTP
// rules and DNS names compiled.
type compiled struct {
	revision uint64
	run      uint64
	eps      map[netip.Addr]*Endpoint
	http     map[*policy.L7Rules]l7.HTTPRules
	dns      map[*policy.L7Rules][]func(string) bool
}

func compile(p Policy) (*compiled, error) {
	c := &compiled{revision: p.Revision, run: p.Run, eps: map[netip.Addr]*Endpoint{}, http: map[*policy.L7Rules]l7.HTTPRules{},
		dns: map[*policy.L7Rules][]func(string) bool{}}
	for i := range p.Endpoints {
		ep := &p.Endpoints[i]
		c.eps[ep.IPv4] = ep
		for _, pr := range ep.Ports {
			for _, a := range pr.Allows {
				if a.L7 == nil {
					continue
				}
				if _, done := c.dns[a.L7]; !done {
					for _, r := range a.L7.DNS {
						c.dns[a.L7] = append(c.dns[a.L7], r.Matcher())
					}
				}
				if len(a.L7.HTTP) == 0 {
					continue
				}
				rs, err := l7.CompileHTTPRules(a.L7.HTTP)
				if err != nil {
					return nil, fmt.Errorf("endpoint %d port %d: %w", ep.ID, pr.Port, err)
				}
				c.http[a.L7] = rs
			}
		}
	}
	return c, nil
}

// redirects says whether ep's port in dir goes through the proxy.
func (ep *Endpoint) redirects(dir spec.Direction, proto uint8, port uint16) bool {
	return slices.ContainsFunc(ep.Ports, func(pr policy.L7Port) bool {
		return pr.Direction == dir && pr.Protocol == proto && pr.Port == port
	})
}

// party is whom the proxy acts for on a connection: the local endpoint
// whose rules judge its requests (nil: none, and nothing is allowed), the
// identity of the other side, and the mark of the proxy's connection
// upstream. server is, on an egress connection to a local endpoint whose
// ingress rules send that port to the proxy, that endpoint: the datapath
// lets the proxy's connection through to it (the proxy's own allow), so
// the proxy judges by its rules too.
type party struct {
	ep, server *Endpoint
	remote     identity.NumericIdentity
	mark       uint32
}

// remoteOf is the identity of the remote side of a connection from src
// to dst in dir: the server's for egress, the client's for ingress.
func (p *Proxy) remoteOf(dir spec.Direction, src, dst netip.AddrPort) identity.NumericIdentity {
	if dir == spec.Ingress {
		return p.cfg.IdentityOf(src.Addr())
	}
	return p.cfg.IdentityOf(dst.Addr())
}

// partyOf finds the party of the connection of request rec (its Src,
// Dst and Protocol) in dir, whose remote side has identity remote
// (remoteOf), and fills in rec's direction, identities and local
// endpoint.
func (p *Proxy) partyOf(c *compiled, dir spec.Direction, rec *accesslog.Record, remote identity.NumericIdentity) party {
	pt := party{remote: remote}
	rec.Direction = dir
	switch dir {
	case spec.Egress:
		pt.ep = c.eps[rec.Src.Addr()]
		rec.DstIdentity = pt.remote
		if pt.ep != nil {
			rec.SrcIdentity, rec.SrcEndpoint = pt.ep.Identity, pt.ep.ID
			pt.mark = tproxy.EgressMark(pt.ep.Identity)
		}
		if srv := c.eps[rec.Dst.Addr()]; srv != nil && srv.redirects(spec.Ingress, rec.Protocol, rec.Dst.Port()) {
			pt.server = srv
		}
	case spec.Ingress:
		pt.ep = c.eps[rec.Dst.Addr()]
		rec.SrcIdentity = pt.remote
		pt.mark = tproxy.IngressMark(pt.remote)
		if pt.ep != nil {
			rec.DstIdentity, rec.DstEndpoint = pt.ep.Identity, pt.ep.ID
		}
	}
	return pt
}

// allows are the allows of ep's port that apply to remote; nil when none
// does (the policy changed since the datapath sent the connection here):
// then nothing is allowed.
func (c *compiled) allows(ep *Endpoint, dir spec.Direction, proto uint8, port uint16, remote identity.NumericIdentity) []*policy.L7Allow {
	var out []*policy.L7Allow
	for i := range ep.Ports {
		pr := &ep.Ports[i]
		if pr.Direction != dir || pr.Protocol != proto || pr.Port != port {
			continue
		}
		for j := range pr.Allows {
			if pr.Allows[j].Applies(remote) {
				out = append(out, &pr.Allows[j])
			}
		}
	}
	return out
}

// allowsAll says whether one of the allows has no layer-7 rules of parser:
// every request passes (and is still shown).
func allowsAll(allows []*policy.L7Allow, parser policy.L7Parser) bool {
	return slices.ContainsFunc(allows, func(a *policy.L7Allow) bool {
		if a.L7 == nil || a.L7.Parser != parser {
			return true
		}
		switch parser {
		case policy.ParserHTTP:
			return allEmpty(a.L7.HTTP)
		case policy.ParserDNS:
			return len(a.L7.DNS) == 0
		}
		return false
	})
}

func allEmpty(rs []l7.HTTPRule) bool {
	return slices.ContainsFunc(rs, func(r l7.HTTPRule) bool {
		return r.Method == "" && r.Path == "" && r.Host == "" && len(r.Headers) == 0 && len(r.HeaderMatches) == 0
	}) || len(rs) == 0
}

// allowsName says whether allows let a query for name through.
func (c *compiled) allowsName(allows []*policy.L7Allow, name string) bool {
	if allowsAll(allows, policy.ParserDNS) {
		return len(allows) > 0
	}
	for _, a := range allows {
		if slices.ContainsFunc(c.dns[a.L7], func(match func(string) bool) bool { return match(name) }) {
			return true
		}
	}
	return false
}

// state holds the proxy's current policy, swapped whole.
type state struct {
	mu  sync.RWMutex
	cur *compiled
}

func (s *state) get() *compiled {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

func (s *state) set(c *compiled) {
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
}
