package policy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// This file is a model of the policy semantics, written from the rules'
// meaning and sharing nothing with the engine but the selectors (tested
// on their own): whether one new connection is allowed. The property
// tests check the engine's entries against it on random rules,
// identities and packets, and that entries changed by delta equal
// entries computed afresh.

// modelWorld is the cluster a scenario plays in.
type modelWorld struct {
	mode       Mode
	rules      []Rule
	ids        []*Identity
	namedPorts map[identity.NumericIdentity]NamedPorts
}

// modelAllows says whether an endpoint with identity subject and named
// ports own may open a connection with remote in direction dir.
func (w *modelWorld) modelAllows(subject *Identity, own NamedPorts, dir spec.Direction, remote *Identity, proto uint8, port uint16) bool {
	if w.mode == ModeNever {
		return true
	}
	isolated := w.mode == ModeAlways
	var applying []Rule
	for _, r := range w.rules {
		if r.Direction == dir && r.Subject.Selects(subject) {
			applying = append(applying, r)
			isolated = isolated || r.DefaultDeny
		}
	}
	matches := func(r Rule) bool {
		for _, peer := range r.Peers {
			_, wild := peer.(Wildcard)
			if !wild && !peer.Selects(remote) {
				continue
			}
			if len(r.Ports) == 0 {
				return true
			}
			for _, p := range r.Ports {
				if w.portMatches(p, dir, wild, own, remote, proto, port) {
					return true
				}
			}
		}
		return false
	}
	for _, r := range applying {
		if r.Deny && matches(r) {
			return false
		}
	}
	if !isolated || (dir == spec.Ingress && remote.ID == identity.Host) {
		return true
	}
	return slices.ContainsFunc(applying, func(r Rule) bool { return !r.Deny && matches(r) })
}

// portMatches: does rule port p cover a packet to proto/port? Names
// resolve on the endpoint for ingress, on the peer for egress, and on
// every pod of the cluster when the peer is anyone.
func (w *modelWorld) portMatches(p Port, dir spec.Direction, wild bool, own NamedPorts, remote *Identity, proto uint8, port uint16) bool {
	if p.Name != "" {
		ports := own
		if dir == spec.Egress {
			ports = w.namedPorts[remote.ID]
			if wild {
				ports = nil
				for _, ps := range w.namedPorts {
					ports = append(ports, ps...)
				}
			}
		}
		for _, np := range ports {
			protoOK := p.AnyL4 || p.Protocol == 0 || p.Protocol == np.Protocol
			if np.Name == p.Name && protoOK && np.Protocol == proto && np.Port == port {
				return true
			}
		}
		return false
	}
	switch {
	case p.AnyL4 && p.Port == 0:
	case p.AnyL4:
		if proto != spec.ProtoTCP && proto != spec.ProtoUDP && proto != spec.ProtoSCTP {
			return false
		}
	case p.Protocol != 0 && p.Protocol != proto:
		return false
	}
	if p.Port == 0 {
		return true
	}
	return port >= p.Port && port <= max(p.Port, p.EndPort)
}

// entriesAllow is the datapath's reading of entries (a deny that matches
// wins, else an allow that matches lets the packet through).
func entriesAllow(ents map[spec.PolicyEntry][]Origin, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) bool {
	allowed := false
	for ent := range ents {
		if ent.Direction != dir || (ent.Identity != identity.Unknown && ent.Identity != remote) || !entryMatches(ent, proto, port) {
			continue
		}
		if ent.Deny {
			return false
		}
		allowed = true
	}
	return allowed
}

var (
	modelApps       = []string{"a", "b", "c"}
	modelNamespaces = []string{"x", "y"}
	modelPrefixes   = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "192.168.0.0/16", "0.0.0.0/0"}
	modelNamed      = []NamedPort{
		{"http", spec.ProtoTCP, 80}, {"http", spec.ProtoTCP, 8080}, {"dns", spec.ProtoUDP, 53}, {"dns", spec.ProtoTCP, 53},
	}
	modelPorts = []Port{
		{}, {Protocol: spec.ProtoTCP, Port: 80}, {Protocol: spec.ProtoUDP, Port: 53}, {Protocol: spec.ProtoTCP, Port: 80, EndPort: 90},
		{Protocol: spec.ProtoTCP, Name: "http"}, {AnyL4: true, Name: "dns"}, {AnyL4: true, Port: 81}, {AnyL4: true},
		{Protocol: spec.ProtoICMP, Port: 8}, {Protocol: spec.ProtoSCTP}, {Protocol: spec.ProtoTCP, Name: "nope"},
	}
	modelPackets = []struct {
		proto uint8
		port  uint16
	}{
		{spec.ProtoTCP, 80}, {spec.ProtoTCP, 85}, {spec.ProtoTCP, 8080}, {spec.ProtoTCP, 53}, {spec.ProtoUDP, 53},
		{spec.ProtoUDP, 81}, {spec.ProtoSCTP, 81}, {spec.ProtoICMP, 8}, {spec.ProtoICMP, 0}, {spec.ProtoTCP, 91},
		// Neighbours of the rules' ports and ranges.
		{spec.ProtoTCP, 79}, {spec.ProtoTCP, 81}, {spec.ProtoTCP, 90}, {spec.ProtoTCP, 8081}, {spec.ProtoUDP, 54},
		{spec.ProtoUDP, 80}, {spec.ProtoSCTP, 82}, {spec.ProtoICMP, 9},
	}
)

func podIdentity(id identity.NumericIdentity, ns, app string) *Identity {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, ns))
	ls.Add(labels.New(labels.SourceK8s, labels.PrefixNamespaceLabels+"kubernetes.io/metadata.name", ns))
	ls.Add(labels.New(labels.SourceK8s, "app", app))
	return &Identity{ID: id, Labels: ls}
}

func modelCIDR(id identity.NumericIdentity, prefix string, inCluster bool) *Identity {
	return &Identity{ID: id, Labels: labels.Labels{}, Prefix: netip.MustParsePrefix(prefix), InCluster: inCluster}
}

// randomWorld draws identities, named ports and rules.
func randomWorld(r *rand.Rand) *modelWorld {
	w := &modelWorld{mode: []Mode{ModeDefault, ModeDefault, ModeAlways, ModeNever}[r.IntN(4)],
		namedPorts: map[identity.NumericIdentity]NamedPorts{}}
	num := identity.MinClusterIdentity
	for _, ns := range modelNamespaces {
		for _, app := range modelApps {
			w.ids = append(w.ids, podIdentity(num, ns, app))
			num++
		}
	}
	for i, p := range modelPrefixes {
		w.ids = append(w.ids, modelCIDR(identity.LocalIdentityFlag+1<<20+identity.NumericIdentity(2*i), p, false),
			modelCIDR(identity.LocalIdentityFlag+1<<20+identity.NumericIdentity(2*i+1), p, true))
	}
	for _, id := range w.ids {
		if id.ID.IsCluster() {
			w.namedPorts[id.ID] = randomSubset(r, modelNamed)
		}
	}
	for range r.IntN(6) {
		w.rules = append(w.rules, randomRule(r))
	}
	return w
}

func randomSubset[T any](r *rand.Rand, from []T) []T {
	var out []T
	for _, x := range from {
		if r.IntN(3) == 0 {
			out = append(out, x)
		}
	}
	return out
}

func randomLabelSelector(r *rand.Rand) Selector {
	s := LabelSelector{Selector: api.EndpointSelector{MatchLabels: map[string]string{}}}
	if r.IntN(2) == 0 {
		s.Selector.MatchLabels["k8s:app"] = modelApps[r.IntN(len(modelApps))]
	}
	if r.IntN(2) == 0 {
		s.Namespace = modelNamespaces[r.IntN(len(modelNamespaces))]
	}
	return s
}

func randomPeer(r *rand.Rand) Selector {
	switch r.IntN(5) {
	case 0:
		return Wildcard{}
	case 1:
		return IdentitySet{Name: "entity:host", IDs: []identity.NumericIdentity{identity.Host}}
	case 2:
		c := CIDRSelector{Prefix: netip.MustParsePrefix(modelPrefixes[r.IntN(len(modelPrefixes))]), InCluster: r.IntN(2) == 0}
		if c.Prefix.Bits() <= 8 && r.IntN(2) == 0 {
			c.Except = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
		}
		return c
	}
	return randomLabelSelector(r)
}

func randomRule(r *rand.Rand) Rule {
	rule := Rule{
		Origin:      Origin{Kind: KindCNP, Namespace: "x", Name: fmt.Sprintf("r%d", r.IntN(1000))},
		Subject:     randomLabelSelector(r),
		Direction:   directions[r.IntN(2)],
		Deny:        r.IntN(4) == 0,
		DefaultDeny: r.IntN(4) != 0,
	}
	for range r.IntN(3) {
		rule.Peers = append(rule.Peers, randomPeer(r))
	}
	for range r.IntN(3) {
		rule.Ports = append(rule.Ports, modelPorts[r.IntN(len(modelPorts))])
	}
	return rule
}

// engineFor builds an engine holding w, with endpoint 1 of identity subject.
func engineFor(w *modelWorld, subject *Identity, own NamedPorts) *Engine {
	e := NewEngine(w.mode)
	for _, id := range w.ids {
		e.UpsertIdentity(id)
		e.SetNamedPorts(id.ID, w.namedPorts[id.ID])
	}
	for i, r := range w.rules {
		e.SetRules(Origin{Kind: KindCNP, Name: fmt.Sprint(i)}, []Rule{r})
	}
	e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: subject.ID, NamedPorts: own})
	return e
}

func TestEngineAgreesWithModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	remotes := func(w *modelWorld) []*Identity {
		out := slices.Clone(w.ids)
		for _, id := range []identity.NumericIdentity{identity.Host, identity.World, identity.RemoteNode} {
			ri, _ := identity.ReservedIdentity(id)
			out = append(out, &Identity{ID: id, Labels: ri.Labels})
		}
		return out
	}
	for i := range 3000 {
		w := randomWorld(r)
		subject := w.ids[r.IntN(len(modelApps)*len(modelNamespaces))]
		own := randomSubset(r, modelNamed)
		e := engineFor(w, subject, own)
		ents := e.Entries(1)
		for _, remote := range remotes(w) {
			for _, dir := range directions {
				for _, pk := range modelPackets {
					want := w.modelAllows(subject, own, dir, remote, pk.proto, pk.port)
					got := entriesAllow(ents, dir, remote.ID, pk.proto, pk.port)
					trace := e.Trace(subject, own, dir, remote, pk.proto, pk.port)
					if got != want || trace.Allowed != want {
						t.Fatalf("scenario %d: %s from identity %d to %d proto %d port %d: model %v, entries %v, trace %v\nrules: %s\nentries: %v",
							i, dir, remote.ID, subject.ID, pk.proto, pk.port, want, got, trace, describeRules(w.rules), ents)
					}
				}
			}
		}
	}
}

func describeRules(rules []Rule) string {
	var s string
	for _, r := range rules {
		s += fmt.Sprintf("\n  %s deny=%v isolate=%v subject=%s peers=%v ports=%v", r.Direction, r.Deny, r.DefaultDeny, r.Subject.Key(), keys(r.Peers), r.Ports)
	}
	return s
}

func keys(sels []Selector) []string {
	var out []string
	for _, s := range sels {
		out = append(out, s.Key())
	}
	return out
}

// Entries reached by deltas (identities coming and going, named ports
// changing, rules replaced) equal entries computed at once.
func TestEngineDeltasEqualFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		w := randomWorld(r)
		subject := w.ids[r.IntN(len(modelApps)*len(modelNamespaces))]
		own := randomSubset(r, modelNamed)

		e := NewEngine(w.mode)
		e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: subject.ID, NamedPorts: own})
		for i, rule := range randomWorld(r).rules { // rules later replaced
			e.SetRules(Origin{Kind: KindCNP, Name: fmt.Sprint(i)}, []Rule{rule})
		}
		ids := slices.Clone(w.ids)
		r.Shuffle(len(ids), func(a, b int) { ids[a], ids[b] = ids[b], ids[a] })
		for _, id := range ids {
			e.UpsertIdentity(id)
			e.SetNamedPorts(id.ID, randomSubset(r, modelNamed))
			if r.IntN(4) == 0 {
				e.DeleteIdentity(id.ID)
			}
		}
		for i := range 6 {
			var rules []Rule
			if i < len(w.rules) {
				rules = []Rule{w.rules[i]}
			}
			e.SetRules(Origin{Kind: KindCNP, Name: fmt.Sprint(i)}, rules)
		}
		for _, id := range ids {
			e.UpsertIdentity(id)
			e.SetNamedPorts(id.ID, w.namedPorts[id.ID])
		}
		fresh := engineFor(w, subject, own)
		e.Flush()
		fresh.Flush()
		if got, want := canonicalEntries(e), canonicalEntries(fresh); !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("scenario %d: by delta %v\nafresh %v\nrules: %s", i, got, want, describeRules(w.rules))
		}
	}
}

// canonicalEntries are endpoint 1's entries with the CIDR identities
// that the engine numbered itself named by their prefixes: two engines
// number them in the order they met them.
func canonicalEntries(e *Engine) map[string][]Origin {
	byID := map[identity.NumericIdentity]cidrKey{}
	for k, ci := range e.cidrs {
		byID[ci.id.ID] = k
	}
	out := map[string][]Origin{}
	for ent, origins := range e.Entries(1) {
		s := ent.String()
		if k, ok := byID[ent.Identity]; ok {
			ent.Identity = 0
			s = fmt.Sprintf("%s (cidr %s in-cluster=%v)", ent, k.prefix, k.inCluster)
		}
		out[s] = origins
	}
	return out
}
