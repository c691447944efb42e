package fqdnmodel

import (
	"net/netip"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// The model says what toFQDNs means on hand-picked cases, before it
// judges the engine.
func TestAllows(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	https := []Port{{Protos: []uint8{spec.ProtoTCP}, Port: 443}}
	allow := func(peers ...Peer) Rule { return Rule{Selects: true, Isolates: true, Peers: peers, Ports: https} }
	name := func(s string) Peer { return Peer{Kind: PeerName, Text: s} }
	pattern := func(s string) Peer { return Peer{Kind: PeerPattern, Text: s} }
	for _, tc := range []struct {
		what    string
		mode    Mode
		rules   []Rule
		learned map[string][]netip.Addr
		port    uint16
		want    bool
	}{
		{what: "learned for the name", rules: []Rule{allow(name("cilium.io"))},
			learned: map[string][]netip.Addr{"cilium.io": {a}}, port: 443, want: true},
		{what: "another port", rules: []Rule{allow(name("cilium.io"))},
			learned: map[string][]netip.Addr{"cilium.io": {a}}, port: 80},
		{what: "learned for another name only", rules: []Rule{allow(name("cilium.io"))},
			learned: map[string][]netip.Addr{"cilium.io": {b}, "evil.example": {a}}, port: 443},
		{what: "learned for the name and another", rules: []Rule{allow(name("cilium.io"))},
			learned: map[string][]netip.Addr{"cilium.io": {a, b}, "evil.example": {a}}, port: 443, want: true},
		{what: "case and the root's dot aside", rules: []Rule{allow(name("Cilium.IO"))},
			learned: map[string][]netip.Addr{"CILIUM.io.": {a}}, port: 443, want: true},
		{what: "a pattern", rules: []Rule{allow(pattern("*.cilium.io"))},
			learned: map[string][]netip.Addr{"docs.cilium.io": {a}}, port: 443, want: true},
		{what: "** stands for one label or more, not none", rules: []Rule{allow(pattern("**.cilium.io"))},
			learned: map[string][]netip.Addr{"cilium.io": {a}}, port: 443},
		{what: "nothing learned", rules: []Rule{allow(pattern("*"))}, port: 443},
		{what: "a rule for another endpoint isolates nothing", rules: []Rule{{Isolates: true, Peers: []Peer{name("x.io")}}}, port: 443, want: true},
		{what: "a deny of the prefix wins", learned: map[string][]netip.Addr{"cilium.io": {a}}, port: 443, rules: []Rule{
			allow(name("cilium.io")), {Selects: true, Deny: true, Peers: []Peer{{Kind: PeerCIDR, Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}}},
		{what: "the prefix's except", rules: []Rule{allow(Peer{Kind: PeerCIDR, Prefix: netip.MustParsePrefix("192.0.2.0/24"),
			Except: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}})}, port: 443},
		{what: "pods are not addresses", rules: []Rule{allow(Peer{Kind: PeerPods})}, port: 443},
		{what: "never", mode: ModeNever, rules: []Rule{allow(name("x.io"))}, port: 443, want: true},
		{what: "always", mode: ModeAlways, port: 443},
	} {
		w := &World{Mode: tc.mode, Rules: tc.rules, Learned: tc.learned}
		if got := w.Allows(a, spec.ProtoTCP, tc.port); got != tc.want {
			t.Errorf("%s: allows %v, want %v", tc.what, got, tc.want)
		}
	}
}
