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
