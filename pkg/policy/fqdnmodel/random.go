package fqdnmodel

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

var (
	// names are what DNS answers name: the patterns below match some
	// of them, each a different set.
	names = []string{"cilium.io", "www.cilium.io", "docs.cilium.io", "a.b.cilium.io", "sub.cilium.io", "subway.cilium.io",
		"xcilium.io", "api.eu.example.com", "example.com", "evil.example"}
	patterns = []string{"*", "**.", "*.cilium.io", "**.cilium.io", "sub*.cilium.io", "*cilium.io", "api.*.example.com",
		"**.example.com", "*.example", "cilium.io", "*.CILIUM.io.", "**.*.io", "*.*.cilium.io"}
	// learnable are the addresses answers give: few, so that names
	// share them; some inside the prefixes below, one the whole of one.
	learnable = addrs("10.1.2.3", "10.1.2.4", "10.1.3.1", "10.2.0.1", "192.168.1.1", "198.51.100.7", "203.0.113.1", "203.0.113.2")
	// Addresses are the destinations to probe: the learnable ones and
	// two never learned, one of them inside the prefixes.
	Addresses = append(slices.Clone(learnable), addrs("8.8.8.8", "10.1.2.5")...)
	cidrs     = []Peer{
		cidr("0.0.0.0/0"), cidr("0.0.0.0/0", "10.0.0.0/8"), cidr("10.0.0.0/8"), cidr("10.0.0.0/8", "10.1.0.0/16"),
		cidr("10.1.2.0/24"), cidr("10.1.2.3/32"), cidr("203.0.113.0/24", "203.0.113.2/32"), cidr("198.51.100.7/32"),
	}
	anyL4 = []uint8{spec.ProtoTCP, spec.ProtoUDP, spec.ProtoSCTP}
	ports = []Port{
		{}, {Protos: []uint8{spec.ProtoTCP}, Port: 443}, {Protos: []uint8{spec.ProtoUDP}, Port: 53},
		{Protos: []uint8{spec.ProtoTCP}, Port: 80, EndPort: 90}, {Protos: anyL4, Port: 53},
		{Protos: []uint8{spec.ProtoUDP}}, {Protos: []uint8{spec.ProtoICMP}, Port: 8},
	}
	// Packets probe the rules' ports and their neighbours.
	Packets = []Packet{
		{spec.ProtoTCP, 443}, {spec.ProtoTCP, 80}, {spec.ProtoTCP, 90}, {spec.ProtoTCP, 91}, {spec.ProtoTCP, 53},
		{spec.ProtoUDP, 53}, {spec.ProtoUDP, 443}, {spec.ProtoSCTP, 53}, {spec.ProtoICMP, 8}, {spec.ProtoICMP, 0},
	}
)

// Packet is a new connection's first packet as the model sees it.
type Packet struct {
	Proto uint8
	Port  uint16
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func cidr(p string, except ...string) Peer {
	c := Peer{Kind: PeerCIDR, Prefix: netip.MustParsePrefix(p)}
	for _, e := range except {
		c.Except = append(c.Except, netip.MustParsePrefix(e))
	}
	return c
}

// MaxRules bounds the rules of a world.
const MaxRules = 5

// Random draws a world: a mode, up to MaxRules rules and learned names.
func Random(r *rand.Rand) *World {
	w := &World{Mode: []Mode{ModeDefault, ModeDefault, ModeDefault, ModeAlways, ModeNever}[r.IntN(5)],
		Learned: randomLearned(r)}
	for range r.IntN(MaxRules + 1) {
		w.Rules = append(w.Rules, randomRule(r))
	}
	return w
}

// spell writes name as an answer or a rule may: with or without the
// root's dot, in any case.
func spell(r *rand.Rand, name string) string {
	switch r.IntN(6) {
	case 0:
		name = strings.ToUpper(name)
	case 1:
		labels := strings.Split(name, ".")
		for i, l := range labels {
			labels[i] = strings.ToUpper(l[:1]) + l[1:]
		}
		name = strings.Join(labels, ".")
	}
	if r.IntN(2) == 0 {
		name += "."
	}
	return name
}

func randomLearned(r *rand.Rand) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for _, n := range names {
		// Half the names are learned; some of those twice, as two
		// spellings (two answers) with addresses of their own.
		for range []int{0, 0, 0, 1, 1, 2}[r.IntN(6)] {
			out[spell(r, n)] = randomAddrs(r)
		}
	}
	return out
}

func randomAddrs(r *rand.Rand) []netip.Addr {
	var out []netip.Addr
	for range 1 + r.IntN(3) {
		if a := learnable[r.IntN(len(learnable))]; !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func randomRule(r *rand.Rand) Rule {
	rule := Rule{Selects: r.IntN(8) != 0, Deny: r.IntN(5) == 0, Isolates: r.IntN(4) != 0}
	for range 1 + r.IntN(3) {
		rule.Peers = append(rule.Peers, randomPeer(r))
	}
	for range r.IntN(3) {
		rule.Ports = append(rule.Ports, ports[r.IntN(len(ports))])
	}
	return rule
}

func randomPeer(r *rand.Rand) Peer {
	switch r.IntN(10) {
	case 0, 1, 2, 3:
		if r.IntN(8) == 0 {
			return Peer{Kind: PeerName, Text: "nope.io"}
		}
		return Peer{Kind: PeerName, Text: spell(r, names[r.IntN(len(names))])}
	case 4, 5, 6:
		return Peer{Kind: PeerPattern, Text: patterns[r.IntN(len(patterns))]}
	case 7:
		c := cidrs[r.IntN(len(cidrs))]
		c.InCluster = r.IntN(3) == 0
		return c
	case 8:
		return Peer{Kind: []PeerKind{PeerWorld, PeerAll}[r.IntN(2)]}
	}
	return Peer{Kind: PeerPods}
}

// Change draws one change of w, as time brings them: a name learned for
// one more address, a name or one of its addresses forgotten (expired),
// everything learned anew (a restart), a rule added, replaced or
// removed. It never changes in place what w held before, so that a copy
// taken before stays as it was.
func (w *World) Change(r *rand.Rand) {
	learned := maps.Clone(w.Learned)
	keys := slices.Sorted(maps.Keys(learned))
	switch r.IntN(7) {
	case 0, 1:
		name := spell(r, names[r.IntN(len(names))])
		if a := learnable[r.IntN(len(learnable))]; !slices.Contains(learned[name], a) {
			learned[name] = append(slices.Clone(learned[name]), a)
		}
	case 2:
		if len(keys) > 0 {
			delete(learned, keys[r.IntN(len(keys))])
		}
	case 3:
		if len(keys) > 0 {
			// Its last address gone, a name stays listed with none.
			k := keys[r.IntN(len(keys))]
			if as := learned[k]; len(as) > 0 {
				learned[k] = slices.Delete(slices.Clone(as), 0, 1)
			}
		}
	case 4:
		learned = randomLearned(r)
	case 5:
		rules := slices.Clone(w.Rules)
		if i := r.IntN(MaxRules); i < len(rules) {
			rules[i] = randomRule(r)
		} else {
			rules = append(rules, randomRule(r))
		}
		w.Rules = rules
	case 6:
		if len(w.Rules) > 0 {
			i := r.IntN(len(w.Rules))
			w.Rules = slices.Delete(slices.Clone(w.Rules), i, i+1)
		}
	}
	w.Learned = learned
}

// Describe prints w for a failure message.
func (w *World) Describe() string {
	s := fmt.Sprintf("mode %d", w.Mode)
	for i, r := range w.Rules {
		s += fmt.Sprintf("\n  rule %d: selects=%v deny=%v isolates=%v peers=%v ports=%v", i, r.Selects, r.Deny, r.Isolates, r.Peers, r.Ports)
	}
	for _, n := range slices.Sorted(maps.Keys(w.Learned)) {
		s += fmt.Sprintf("\n  learned %q: %v", n, w.Learned[n])
	}
	return s
}

func (p Peer) String() string {
	switch p.Kind {
	case PeerName:
		return "name:" + p.Text
	case PeerPattern:
		return "pattern:" + p.Text
	case PeerCIDR:
		return fmt.Sprintf("cidr:%s-%v(in-cluster=%v)", p.Prefix, p.Except, p.InCluster)
	case PeerWorld:
		return "world"
	case PeerAll:
		return "all"
	}
	return "pods"
}
