// Package policymodel is a model of network policy's meaning, written
// from the rules' semantics and sharing nothing with the engine but the
// selectors (tested on their own): whether one new connection is
// allowed. Property tests check the engine's entries (pkg/policy) and
// the datapath's verdicts (internal/datapath, through BPF_PROG_RUN)
// against it on random worlds that Random draws.
package policymodel

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// World is the cluster a scenario plays in.
type World struct {
	Mode       policy.Mode
	Rules      []policy.Rule
	IDs        []*policy.Identity
	NamedPorts map[identity.NumericIdentity]policy.NamedPorts
}

// Allows says whether an endpoint with identity subject and named ports
// own may open a connection in direction dir with a peer that has the
// identities remotes: its own, and for an address in an ipBlock the
// block's CIDR identity.
func (w *World) Allows(subject *policy.Identity, own policy.NamedPorts, dir spec.Direction, remotes []*policy.Identity, proto uint8, port uint16) bool {
	if w.Mode == policy.ModeNever {
		return true
	}
	isolated := w.Mode == policy.ModeAlways
	var applying []policy.Rule
	for _, r := range w.Rules {
		if r.Direction == dir && r.Subject.Selects(subject) {
			applying = append(applying, r)
			isolated = isolated || r.DefaultDeny
		}
	}
	matches := func(r policy.Rule) bool {
		for _, peer := range r.Peers {
			_, wild := peer.(policy.Wildcard)
			for _, remote := range remotes {
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
		}
		return false
	}
	for _, r := range applying {
		if r.Deny && matches(r) {
			return false
		}
	}
	if !isolated || (dir == spec.Ingress && remotes[0].ID == identity.Host) {
		return true
	}
	return slices.ContainsFunc(applying, func(r policy.Rule) bool { return !r.Deny && matches(r) })
}

// portMatches: does rule port p cover a packet to proto/port? Names
// resolve on the endpoint for ingress, on the peer for egress, and on
// every pod of the cluster when the peer is anyone or an address (a
// CIDR identity).
func (w *World) portMatches(p policy.Port, dir spec.Direction, wild bool, own policy.NamedPorts, remote *policy.Identity, proto uint8, port uint16) bool {
	if p.Name != "" {
		ports := own
		if dir == spec.Egress {
			ports = w.NamedPorts[remote.ID]
			if wild || remote.Prefix.IsValid() {
				ports = nil
				for _, ps := range w.NamedPorts {
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

// Packet is a new connection's first packet as the model sees it.
type Packet struct {
	Proto uint8
	Port  uint16
}

var (
	apps       = []string{"a", "b", "c"}
	namespaces = []string{"x", "y"}
	prefixes   = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "192.168.0.0/16", "0.0.0.0/0"}
	named      = []policy.NamedPort{
		{Name: "http", Protocol: spec.ProtoTCP, Port: 80}, {Name: "http", Protocol: spec.ProtoTCP, Port: 8080},
		{Name: "dns", Protocol: spec.ProtoUDP, Port: 53}, {Name: "dns", Protocol: spec.ProtoTCP, Port: 53},
	}
	ports = []policy.Port{
		{}, {Protocol: spec.ProtoTCP, Port: 80}, {Protocol: spec.ProtoUDP, Port: 53}, {Protocol: spec.ProtoTCP, Port: 80, EndPort: 90},
		{Protocol: spec.ProtoTCP, Name: "http"}, {AnyL4: true, Name: "dns"}, {AnyL4: true, Port: 81}, {AnyL4: true},
		{Protocol: spec.ProtoICMP, Port: 8}, {Protocol: spec.ProtoSCTP}, {Protocol: spec.ProtoTCP, Name: "nope"},
	}
	// Packets probe the rules' ports and their neighbours.
	Packets = []Packet{
		{spec.ProtoTCP, 80}, {spec.ProtoTCP, 85}, {spec.ProtoTCP, 8080}, {spec.ProtoTCP, 53}, {spec.ProtoUDP, 53},
		{spec.ProtoUDP, 81}, {spec.ProtoSCTP, 81}, {spec.ProtoICMP, 8}, {spec.ProtoTCP, 91},
		{spec.ProtoTCP, 79}, {spec.ProtoTCP, 81}, {spec.ProtoTCP, 90}, {spec.ProtoTCP, 8081}, {spec.ProtoUDP, 54},
		{spec.ProtoUDP, 80}, {spec.ProtoSCTP, 82},
	}
)

// FirstCIDRIdentity numbers the world's CIDR identities, clear of the
// engine's own (which count up from LocalIdentityFlag+1).
const FirstCIDRIdentity = identity.LocalIdentityFlag + 1<<20

// PodIdentity is a pod's identity in namespace ns with label app.
func PodIdentity(id identity.NumericIdentity, ns, app string) *policy.Identity {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, ns))
	ls.Add(labels.New(labels.SourceK8s, labels.PrefixNamespaceLabels+"kubernetes.io/metadata.name", ns))
	ls.Add(labels.New(labels.SourceK8s, "app", app))
	return &policy.Identity{ID: id, Labels: ls}
}

// Random draws identities (pods, and CIDR identities of the world and
// in-cluster ones), named ports and up to five rules.
func Random(r *rand.Rand) *World {
	w := &World{Mode: []policy.Mode{policy.ModeDefault, policy.ModeDefault, policy.ModeAlways, policy.ModeNever}[r.IntN(4)],
		NamedPorts: map[identity.NumericIdentity]policy.NamedPorts{}}
	num := identity.MinClusterIdentity
	for _, ns := range namespaces {
		for _, app := range apps {
			w.IDs = append(w.IDs, PodIdentity(num, ns, app))
			num++
		}
	}
	for i, p := range prefixes {
		for j, inCluster := range []bool{false, true} {
			w.IDs = append(w.IDs, &policy.Identity{ID: FirstCIDRIdentity + identity.NumericIdentity(2*i+j), Labels: labels.Labels{},
				Prefix: netip.MustParsePrefix(p), InCluster: inCluster})
		}
	}
	for _, id := range w.IDs {
		if id.ID.IsCluster() {
			w.NamedPorts[id.ID] = Subset(r, named)
		}
	}
	for range r.IntN(6) {
		w.Rules = append(w.Rules, randomRule(r))
	}
	return w
}

// Pods are the world's pod identities.
func (w *World) Pods() []*policy.Identity {
	return slices.DeleteFunc(slices.Clone(w.IDs), func(id *policy.Identity) bool { return !id.ID.IsCluster() })
}

// Remotes are the peers to probe: each identity alone (reserved ones
// included), and each pod with each in-cluster CIDR identity.
func (w *World) Remotes() [][]*policy.Identity {
	var out [][]*policy.Identity
	for _, id := range w.IDs {
		out = append(out, []*policy.Identity{id})
	}
	for _, num := range []identity.NumericIdentity{identity.Host, identity.World, identity.RemoteNode} {
		ri, _ := identity.ReservedIdentity(num)
		out = append(out, []*policy.Identity{{ID: num, Labels: ri.Labels}})
	}
	for _, pod := range w.Pods() {
		for _, id := range w.IDs {
			if id.InCluster {
				out = append(out, []*policy.Identity{pod, id})
			}
		}
	}
	return out
}

// Subset draws about a third of from.
func Subset[T any](r *rand.Rand, from []T) []T {
	var out []T
	for _, x := range from {
		if r.IntN(3) == 0 {
			out = append(out, x)
		}
	}
	return out
}

// NamedPortChoices are the named ports endpoints draw from.
func NamedPortChoices() []policy.NamedPort { return slices.Clone(named) }

func randomLabelSelector(r *rand.Rand) policy.Selector {
	s := policy.LabelSelector{Selector: api.EndpointSelector{MatchLabels: map[string]string{}}}
	if r.IntN(2) == 0 {
		s.Selector.MatchLabels["k8s:app"] = apps[r.IntN(len(apps))]
	}
	if r.IntN(2) == 0 {
		s.Namespace = namespaces[r.IntN(len(namespaces))]
	}
	return s
}

func randomPeer(r *rand.Rand) policy.Selector {
	switch r.IntN(5) {
	case 0:
		return policy.Wildcard{}
	case 1:
		return policy.IdentitySet{Name: "entity:host", IDs: []identity.NumericIdentity{identity.Host}}
	case 2:
		c := policy.CIDRSelector{Prefix: netip.MustParsePrefix(prefixes[r.IntN(len(prefixes))]), InCluster: r.IntN(2) == 0}
		if c.Prefix.Bits() <= 8 && r.IntN(2) == 0 {
			c.Except = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
		}
		return c
	}
	return randomLabelSelector(r)
}

func randomRule(r *rand.Rand) policy.Rule {
	rule := policy.Rule{
		Origin:      policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: fmt.Sprintf("r%d", r.IntN(1000))},
		Subject:     randomLabelSelector(r),
		Direction:   []spec.Direction{spec.Ingress, spec.Egress}[r.IntN(2)],
		Deny:        r.IntN(4) == 0,
		DefaultDeny: r.IntN(4) != 0,
	}
	for range r.IntN(3) {
		rule.Peers = append(rule.Peers, randomPeer(r))
	}
	for range r.IntN(3) {
		rule.Ports = append(rule.Ports, ports[r.IntN(len(ports))])
	}
	return rule
}

// Engine builds an engine holding w, with endpoint id of identity
// subject and named ports own.
func (w *World) Engine(id uint16, subject *policy.Identity, own policy.NamedPorts) *policy.Engine {
	e := policy.NewEngine(w.Mode)
	for _, ident := range w.IDs {
		e.UpsertIdentity(ident)
		e.SetNamedPorts(ident.ID, w.NamedPorts[ident.ID])
	}
	for i, r := range w.Rules {
		e.SetRules(policy.Origin{Kind: policy.KindCNP, Name: fmt.Sprint(i)}, []policy.Rule{r})
	}
	e.UpsertEndpoint(policy.EndpointInfo{ID: id, Identity: subject.ID, NamedPorts: own})
	return e
}

// Describe prints rules for a failure message.
func Describe(rules []policy.Rule) string {
	var s string
	for _, r := range rules {
		var peers []string
		for _, p := range r.Peers {
			peers = append(peers, p.Key())
		}
		s += fmt.Sprintf("\n  %s deny=%v isolate=%v subject=%s peers=%v ports=%v", r.Direction, r.Deny, r.DefaultDeny,
			r.Subject.Key(), peers, r.Ports)
	}
	return s
}
