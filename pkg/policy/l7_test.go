package policy

import (
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
	}
	entries := func(http, dnsPort uint16) []spec.PolicyEntry {
		e := NewEngine(ModeDefault)
		e.SetProxyPorts(http, dnsPort)
		for _, id := range []*Identity{web, api, dns} {
			e.UpsertIdentity(id)
		}
		e.SetRules(o, rules)
		e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: web.ID})
		e.Flush()
		var out []spec.PolicyEntry
		for ent := range e.Entries(1) {
			if ent.Direction == spec.Egress {
				out = append(out, ent)
			}
		}
		slices.SortFunc(out, func(a, b spec.PolicyEntry) int {
			return int(a.Identity)*65536 + int(a.Port) - int(b.Identity)*65536 - int(b.Port)
		})
		return out
	}
	want := []spec.PolicyEntry{
		{Direction: spec.Egress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 80, ProxyPort: 15001},
		{Direction: spec.Egress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 81},
		{Direction: spec.Egress, Identity: api.ID, Protocol: spec.ProtoTCP, Port: 82, Deny: true},
		{Direction: spec.Egress, Identity: dns.ID, Protocol: spec.ProtoUDP, Port: 53, ProxyPort: 15053},
	}
	if got := entries(15001, 15053); !slices.Equal(got, want) {
		t.Fatalf("entries\n%v\nwant\n%v", got, want)
	}
	// No DNS proxy: the DNS allow is gone, the endpoint still isolated.
	want = slices.Delete(want, 3, 4)
	if got := entries(15001, 0); !slices.Equal(got, want) {
		t.Fatalf("without a DNS proxy: entries\n%v\nwant\n%v", got, want)
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
	e.SetProxyPorts(15001, 15053)
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
