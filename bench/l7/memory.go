package main

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
	"github.com/cilium-go/cilium/pkg/proxy"
)

// The memory part's scale: 1,000 FQDN selectors, 20 on each of 50
// endpoints, and 10 addresses learned for the name each selects: 10,000
// learned IPs.
const (
	memEndpoints   = 50
	selectorsPerEp = 20
	ipsPerName     = 10
	kubeDNS        = identity.NumericIdentity(102) // the peer of the DNS rules' allow
)

// fqdnSelector is one selector of the memory part: its endpoint, its
// rule (a matchName or a matchPattern, alternately) and the name a
// lookup of the endpoint learned for it.
type fqdnSelector struct {
	ep   int
	rule policy.DNSRule
	name string
}

// fqdnSelectors are n selectors over eps endpoints, each distinct.
func fqdnSelectors(eps, perEp int) []fqdnSelector {
	var out []fqdnSelector
	for ep := range eps {
		for j := range perEp {
			s := fqdnSelector{ep: ep}
			if j%2 == 0 {
				s.name = fmt.Sprintf("svc%d.app%d.example.com.", j, ep)
				s.rule.MatchName = s.name[:len(s.name)-1]
			} else {
				s.rule.MatchPattern = fmt.Sprintf("*.app%d-%d.example.org", ep, j)
				s.name = fmt.Sprintf("api.app%d-%d.example.org.", ep, j)
			}
			out = append(out, s)
		}
	}
	return out
}

// learnedIP is the k-th learned address, in 198.18.0.0/15 (benchmarking).
func learnedIP(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18 + byte(k>>16&1), byte(k >> 8), byte(k)})
}

// lookups are what the selectors' endpoints learned: ipsPerName
// addresses for each selector's name, every address distinct.
func lookups(sels []fqdnSelector, now time.Time) []fqdn.Lookup {
	out := make([]fqdn.Lookup, len(sels))
	for i, s := range sels {
		l := fqdn.Lookup{Endpoint: epID(s.ep), Name: s.name, TTL: 3600, Time: now}
		for j := range ipsPerName {
			l.IPs = append(l.IPs, learnedIP(i*ipsPerName+j))
		}
		out[i] = l
	}
	return out
}

func epID(ep int) uint16 { return uint16(ep + 1) }

func epIdentity(ep int) *policy.Identity {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, "bench"))
	ls.Add(labels.New(labels.SourceK8s, "app", fmt.Sprint("app", ep)))
	return &policy.Identity{ID: identity.MinClusterIdentity + identity.NumericIdentity(ep), Labels: ls}
}

// buildProxy is a proxy holding a policy for the endpoints, each with its
// DNS port's allow to kube-dns carrying its selectors' rules (none
// without rules): the proxy's side of toFQDNs.
func buildProxy(sels []fqdnSelector, withRules bool) (*proxy.Proxy, error) {
	p := proxy.New(proxy.Config{DNSPort: dnsProxyPort})
	pol := proxy.Policy{Revision: 1}
	for ep := range memEndpoints {
		rules := &policy.L7Rules{Parser: policy.ParserDNS}
		if withRules {
			for _, s := range sels {
				if s.ep == ep {
					rules.DNS = append(rules.DNS, s.rule)
				}
			}
		}
		pol.Endpoints = append(pol.Endpoints, proxy.Endpoint{ID: epID(ep), Identity: epIdentity(ep).ID,
			IPv4: netip.AddrFrom4([4]byte{10, 1, byte(ep >> 8), byte(ep)}),
			Ports: []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoUDP, Port: dnsPort,
				Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{kubeDNS}, L7: rules}}}}})
	}
	return p, p.SetPolicy(pol)
}

// buildCache is the agent's name cache holding what the lookups taught.
func buildCache(ls []fqdn.Lookup) *fqdn.Cache {
	c := fqdn.NewCache(agentCache)
	for _, l := range ls {
		c.Learn(l)
	}
	return c
}

// buildEngine is a policy engine with the endpoints and their
// identities; withRules adds each endpoint's toFQDNs rule (its selectors,
// to TCP 443), and names the names of the learned addresses, as the
// agent gives them (the cache's Names). Its changes are flushed, as the
// agent flushes them into the maps.
func buildEngine(sels []fqdnSelector, withRules bool, names func() map[netip.Addr][]string) *policy.Engine {
	e := policy.NewEngine(policy.ModeDefault)
	for ep := range memEndpoints {
		id := epIdentity(ep)
		e.UpsertIdentity(id)
		e.UpsertEndpoint(policy.EndpointInfo{ID: epID(ep), Identity: id.ID})
	}
	if withRules {
		for ep := range memEndpoints {
			origin := policy.Origin{Kind: policy.KindCNP, Namespace: "bench", Name: fmt.Sprint("fqdn-", ep)}
			r := policy.Rule{Origin: origin, Direction: spec.Egress, DefaultDeny: true, Ports: []policy.Port{{Protocol: spec.ProtoTCP, Port: 443}},
				Subject: policy.LabelSelector{Selector: api.EndpointSelector{MatchLabels: map[string]string{"k8s:app": fmt.Sprint("app", ep)}}}}
			for _, s := range sels {
				if s.ep == ep {
					r.Peers = append(r.Peers, policy.NewFQDNSelector(s.rule))
				}
			}
			e.SetRules(origin, []policy.Rule{r})
		}
	}
	if names != nil {
		e.SetFQDNNames(names())
	}
	e.Flush()
	return e
}

// retained is the heap that what build returns holds, after collecting
// everything else that building it made.
func retained(build func() (any, error)) (int64, error) {
	before := liveHeap()
	x, err := build()
	if err != nil {
		return 0, err
	}
	after := liveHeap()
	runtime.KeepAlive(x)
	return after - before, nil
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memFigure is one structure's heap with its items and without, by
// repetition.
type memFigure struct {
	what      string
	items     int
	per       string // what an item is
	base, all []int64
}

// memoryPart measures each structure reps times.
func memoryPart(reps int) ([]memFigure, error) {
	sels := fqdnSelectors(memEndpoints, selectorsPerEp)
	ls := lookups(sels, time.Now())
	namesOf := func() map[netip.Addr][]string { return buildCache(ls).Names() }
	figs := []memFigure{
		{what: fmt.Sprintf("proxy: policy with %d DNS rules on %d endpoints", len(sels), memEndpoints), items: len(sels), per: "rule"},
		{what: fmt.Sprintf("name cache (pkg/fqdn): %d learned IPs", len(sels)*ipsPerName), items: len(sels) * ipsPerName, per: "IP"},
		{what: fmt.Sprintf("policy engine: %d FQDN selectors in rules", len(sels)), items: len(sels), per: "selector"},
		{what: fmt.Sprintf("policy engine: %d learned IPs (SetFQDNNames)", len(sels)*ipsPerName), items: len(sels) * ipsPerName, per: "IP"},
	}
	builds := [][2]func() (any, error){
		{func() (any, error) { return buildProxy(sels, false) }, func() (any, error) { return buildProxy(sels, true) }},
		{func() (any, error) { return buildCache(nil), nil }, func() (any, error) { return buildCache(ls), nil }},
		{func() (any, error) { return buildEngine(sels, false, nil), nil }, func() (any, error) { return buildEngine(sels, true, nil), nil }},
		{func() (any, error) { return buildEngine(sels, true, nil), nil }, func() (any, error) { return buildEngine(sels, true, namesOf), nil }},
	}
	for range reps {
		for i, b := range builds {
			base, err := retained(b[0])
			if err != nil {
				return nil, err
			}
			all, err := retained(b[1])
			if err != nil {
				return nil, err
			}
			figs[i].base, figs[i].all = append(figs[i].base, base), append(figs[i].all, all)
		}
	}
	return figs, nil
}

// learnCost is the agent's time to learn a known name's answer again
// into a cache holding every lookup: its work for each allowed answer of
// a name it knows, at the memory part's scale.
func learnCost(n int) time.Duration {
	sels := fqdnSelectors(memEndpoints, selectorsPerEp)
	ls := lookups(sels, time.Now())
	c := buildCache(ls)
	start := time.Now()
	for i := range n {
		c.Learn(ls[i%len(ls)])
	}
	return time.Since(start) / time.Duration(n)
}
