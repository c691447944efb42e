package policy

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/l7"
)

// An allow with layer-7 rules gives entries with its parser's proxy port;
// the same allow without rules gives plain entries; a parser the engine
// has no port for makes the allow allow nothing (layer-7 rules are never
// bypassed), while its rule still isolates the endpoint. A deny never
// redirects.
func TestLayer7AllowsSendToTheProxy(t *testing.T) {
	web, api, dns := appIdentity(1000, "web"), appIdentity(1001, "api"), appIdentity(1002, "dns")
	sel := func(id *Identity) Selector {
		return IdentitySet{Name: id.Labels.String(), IDs: []identity.NumericIdentity{id.ID}}
	}
	o := Origin{Kind: KindCNP, Namespace: "x", Name: "l7"}
	rules := []Rule{
		{Origin: o, Subject: sel(web), Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{sel(api)},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 80}},
			L7:    &L7Rules{Parser: ParserHTTP, HTTP: []l7.HTTPRule{{Method: "GET"}}}},
		{Origin: o, Subject: sel(web), Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{sel(api)},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 81}}},
		{Origin: o, Subject: sel(web), Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{sel(dns)},
			Ports: []Port{{Protocol: spec.ProtoUDP, Port: 53}}, L7: &L7Rules{Parser: ParserDNS, DNS: []DNSRule{{MatchPattern: "*"}}}},
		{Origin: o, Subject: sel(web), Direction: spec.Egress, Deny: true, Peers: []Selector{sel(api)},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 82}}, L7: &L7Rules{Parser: ParserHTTP}},
		// Ingress HTTP rules go to the ingress port; no proxy takes DNS
		// on ingress.
		{Origin: o, Subject: sel(web), Direction: spec.Ingress, DefaultDeny: true, Peers: []Selector{sel(api)},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 8080}}, L7: &L7Rules{Parser: ParserHTTP}},
		{Origin: o, Subject: sel(web), Direction: spec.Ingress, DefaultDeny: true, Peers: []Selector{sel(dns)},
			Ports: []Port{{Protocol: spec.ProtoUDP, Port: 53}}, L7: &L7Rules{Parser: ParserDNS}},
	}
	entries := func(ports ProxyPorts) []spec.PolicyEntry {
		e := NewEngine(ModeDefault)
		e.SetProxyPorts(ports)
		for _, id := range []*Identity{web, api, dns} {
			e.UpsertIdentity(id)
		}
		e.SetRules(o, rules)
		e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
		e.Flush()
		var out []spec.PolicyEntry
		for ent := range e.Entries(1) {
			// Ingress from the host: allowed by default.
			if ent.Identity != identity.Host {
				out = append(out, ent)
			}
		}
		slices.SortFunc(out, func(a, b spec.PolicyEntry) int {
			return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Identity, b.Identity), cmp.Compare(a.Port, b.Port))
		})
		return out
	}
	want := []spec.PolicyEntry{
		{Direction: spec.Ingress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 8080, ProxyPort: 15002},
		{Direction: spec.Egress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 80, ProxyPort: 15001},
		{Direction: spec.Egress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 81},
		{Direction: spec.Egress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 82, Deny: true},
		{Direction: spec.Egress, Identity: dns.ID, Protocol: spec.ProtoUDP, Port: 53, ProxyPort: 15053},
	}
	if got := entries(ProxyPorts{HTTP: 15001, HTTPIngress: 15002, DNS: 15053}); !slices.Equal(got, want) {
		t.Fatalf("entries\n%v\nwant\n%v", got, want)
	}
	// No DNS proxy and no ingress HTTP proxy: their allows are gone, the
	// endpoint still isolated.
	want = slices.Delete(slices.Delete(want, 4, 5), 0, 1)
	if got := entries(ProxyPorts{HTTP: 15001}); !slices.Equal(got, want) {
		t.Fatalf("without DNS and ingress HTTP proxies: entries\n%v\nwant\n%v", got, want)
	}
}

// The proxy judges a redirected port by every allow of it: the layer-7
// rules of the allows that have them, and allows without rules (a
// broader allow of the same peer, the allow-all of a direction no rule
// isolates), which let everything through.
func TestLayer7PortsListEveryAllowOfTheirPort(t *testing.T) {
	web, api, other := appIdentity(1000, "web"), appIdentity(1001, "api"), appIdentity(1002, "other")
	sel := func(id *Identity) Selector {
		return IdentitySet{Name: id.Labels.String(), IDs: []identity.NumericIdentity{id.ID}}
	}
	o := Origin{Kind: KindCNP, Namespace: "x", Name: "l7"}
	get := &L7Rules{Parser: ParserHTTP, HTTP: []l7.HTTPRule{{Method: "GET"}}}
	e := NewEngine(ModeDefault)
	e.SetProxyPorts(ProxyPorts{HTTP: 15001, DNS: 15053})
	for _, id := range []*Identity{web, api, other} {
		e.UpsertIdentity(id)
	}
	e.SetRules(o, []Rule{
		{Origin: o, Subject: sel(web), Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{sel(api), sel(other)},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 80}}, L7: get},
		// All of other's ports, 80 included, without rules.
		{Origin: o, Subject: sel(web), Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{sel(other)}},
		// Another port of api: no proxy.
		{Origin: o, Subject: sel(web), Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{sel(api)},
			Ports: []Port{{Protocol: spec.ProtoTCP, Port: 443}}},
	})
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
	eps, _ := e.Flush()
	if len(eps) != 1 {
		t.Fatalf("statuses %+v", eps)
	}
	want := []L7Port{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 80, Allows: []L7Allow{
		{Identities: []identity.NumericIdentity{api.ID}, L7: get},
		{Identities: []identity.NumericIdentity{other.ID}, L7: get},
		{Identities: []identity.NumericIdentity{other.ID}},
	}}}
	got := eps[0].L7
	if len(got) != 1 || got[0].Direction != want[0].Direction || got[0].Port != 80 || got[0].Protocol != spec.ProtoTCP ||
		!slices.EqualFunc(got[0].Allows, want[0].Allows, func(a, b L7Allow) bool {
			return a.Wildcard == b.Wildcard && slices.Equal(a.Identities, b.Identities) && a.L7.Equal(b.L7)
		}) {
		t.Fatalf("L7 ports %+v, want %+v", got, want)
	}
	// Ingress is not isolated: its allow-all would be listed for a
	// redirected ingress port; egress lists no wildcard here.
	for _, a := range got[0].Allows {
		if a.Wildcard {
			t.Fatalf("egress is isolated, yet a wildcard allow: %+v", a)
		}
	}
}

// toFQDNs selects the addresses learned for the names it matches: each
// gets the CIDR identity of its /32, which carries its names. An address
// that an allowed name and another name share is selected by the allowed
// name alone: learned for the other name only, it is not. Names that go
// take the address's entries with them.
func TestFQDNSelectorsSelectLearnedAddresses(t *testing.T) {
	web := appIdentity(1000, "web")
	o := Origin{Kind: KindCNP, Namespace: "x", Name: "fqdn"}
	e := NewEngine(ModeDefault)
	e.UpsertIdentity(web)
	e.SetRules(o, []Rule{{Origin: o, Subject: IdentitySet{Name: "web", IDs: []identity.NumericIdentity{web.ID}},
		Direction: spec.Egress, DefaultDeny: true, Peers: []Selector{NewFQDNSelector(DNSRule{MatchPattern: "*.cilium.io"})},
		Ports: []Port{{Protocol: spec.ProtoTCP, Port: 443}}}})
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
	allowed := func() map[netip.Addr]bool {
		t.Helper()
		e.Flush()
		byID := map[identity.NumericIdentity]netip.Addr{}
		for _, p := range e.Prefixes() {
			byID[p.Identity] = p.Prefix.Addr()
		}
		out := map[netip.Addr]bool{}
		for ent := range e.Entries(1) {
			if ent.Direction == spec.Egress && ent.Port == 443 {
				a, ok := byID[ent.Identity]
				if !ok {
					t.Fatalf("entry %v names no prefix's identity", ent)
				}
				out[a] = true
			}
		}
		return out
	}
	docs, shared, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	e.SetFQDNNames(map[netip.Addr][]string{docs: {"docs.cilium.io."}, other: {"evil.example."}})
	if got := allowed(); !maps.Equal(got, map[netip.Addr]bool{docs: true}) {
		t.Fatalf("allowed %v, want docs only", got)
	}
	// shared: first learned for the other name only, then for ours too.
	e.SetFQDNNames(map[netip.Addr][]string{docs: {"docs.cilium.io."}, other: {"evil.example."}, shared: {"evil.example."}})
	if got := allowed(); got[shared] {
		t.Fatal("an address learned for a name no rule allows is allowed")
	}
	e.SetFQDNNames(map[netip.Addr][]string{docs: {"docs.cilium.io."}, shared: {"evil.example.", "www.cilium.io."}})
	if got := allowed(); !maps.Equal(got, map[netip.Addr]bool{docs: true, shared: true}) {
		t.Fatalf("allowed %v, want docs and shared", got)
	}
	prefixes := len(e.Prefixes())
	e.SetFQDNNames(map[netip.Addr][]string{shared: {"www.cilium.io."}})
	if got := allowed(); !maps.Equal(got, map[netip.Addr]bool{shared: true}) {
		t.Fatalf("allowed %v after docs expired, want shared", got)
	}
	if len(e.Prefixes()) != prefixes-1 {
		t.Fatalf("prefixes %v: the expired address's identity stays", e.Prefixes())
	}
}

// After a restart, prefixes get the CIDR identities they had before (the
// datapath's ipcache keeps them) whatever order they come back in, and
// new prefixes never take one of those numbers.
func TestRestoredCIDRIdentitiesKeepTheirNumbers(t *testing.T) {
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}) }
	restored := map[netip.Prefix]identity.NumericIdentity{}
	names := map[netip.Addr][]string{}
	for i := 1; i <= 20; i++ {
		restored[netip.PrefixFrom(addr(i), 32)] = identity.LocalIdentityFlag | identity.NumericIdentity(100-i)
		names[addr(i)] = []string{fmt.Sprintf("n%d.example.", i)}
	}
	// 192.0.2.10/32 was restored and comes back as a CIDR rule's first,
	// before the names; 198.51.100.0/24 is new.
	o := Origin{Kind: KindCNP, Namespace: "x", Name: "cidr"}
	e := NewEngine(ModeDefault)
	e.RestoreCIDRIdentities(restored)
	web := appIdentity(1000, "web")
	e.UpsertIdentity(web)
	e.SetRules(o, []Rule{{Origin: o, Subject: IdentitySet{Name: "web", IDs: []identity.NumericIdentity{web.ID}}, Direction: spec.Egress,
		Peers: []Selector{CIDRSelector{Prefix: netip.MustParsePrefix("198.51.100.0/24")}, CIDRSelector{Prefix: netip.MustParsePrefix("192.0.2.10/32")}}}})
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
	e.Flush()
	e.SetFQDNNames(names)
	e.Flush()
	got := map[netip.Prefix]identity.NumericIdentity{}
	for _, p := range e.Prefixes() {
		got[p.Prefix] = p.Identity
	}
	for p, id := range restored {
		if got[p] != id {
			t.Errorf("%s: identity %d, want the restored %d", p, got[p], id)
		}
	}
	fresh := got[netip.MustParsePrefix("198.51.100.0/24")]
	if fresh&identity.LocalIdentityFlag == 0 || slices.Contains(slices.Collect(maps.Values(restored)), fresh) {
		t.Errorf("the new prefix got %d: not a fresh CIDR identity", fresh)
	}
}
