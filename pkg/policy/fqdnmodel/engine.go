package fqdnmodel

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// What a world is to the engine: its rules (policy.Rule, one origin
// each), its learned names (Engine.SetFQDNNames) and the endpoint the
// rules are about.

// EndpointIdentity is the identity of the endpoint, a pod.
func EndpointIdentity() *policy.Identity {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, "x"))
	ls.Add(labels.New(labels.SourceK8s, "app", "web"))
	return &policy.Identity{ID: identity.MinClusterIdentity, Labels: ls}
}

// EngineMode is w's mode for policy.NewEngine.
func (w *World) EngineMode() policy.Mode {
	return map[Mode]policy.Mode{ModeDefault: policy.ModeDefault, ModeAlways: policy.ModeAlways, ModeNever: policy.ModeNever}[w.Mode]
}

// Origin is the object that holds rule i.
func Origin(i int) policy.Origin {
	return policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: fmt.Sprint("r", i)}
}

// EngineRule is rule i as the engine takes it.
func (w *World) EngineRule(i int) policy.Rule {
	r := w.Rules[i]
	subject := "web"
	if !r.Selects {
		subject = "db"
	}
	out := policy.Rule{Origin: Origin(i), Direction: spec.Egress, Deny: r.Deny, DefaultDeny: r.Isolates,
		Subject: policy.LabelSelector{Selector: api.EndpointSelector{MatchLabels: map[string]string{"k8s:app": subject}}}}
	for _, p := range r.Peers {
		out.Peers = append(out.Peers, p.selector())
	}
	for _, p := range r.Ports {
		out.Ports = append(out.Ports, p.enginePort())
	}
	return out
}

func (p Peer) selector() policy.Selector {
	switch p.Kind {
	case PeerName:
		return policy.NewFQDNSelector(policy.DNSRule{MatchName: p.Text})
	case PeerPattern:
		return policy.NewFQDNSelector(policy.DNSRule{MatchPattern: p.Text})
	case PeerCIDR:
		return policy.CIDRSelector{Prefix: p.Prefix, Except: p.Except, InCluster: p.InCluster}
	case PeerWorld:
		return policy.EntitySelector(api.EntityWorld)
	case PeerAll:
		return policy.EntitySelector(api.EntityAll)
	}
	return policy.LabelSelector{} // every pod
}

func (p Port) enginePort() policy.Port {
	switch len(p.Protos) {
	case 0:
		return policy.Port{}
	case 1:
		return policy.Port{Protocol: p.Protos[0], Port: p.Port, EndPort: p.EndPort}
	}
	// TCP, UDP and SCTP: Cilium's ANY, which means them only with a
	// port (without one, ANY is every protocol).
	return policy.Port{AnyL4: true, Port: p.Port, EndPort: p.EndPort}
}

// AddressNames are w's learned names in the form SetFQDNNames takes,
// the names of each address, written as loosely as the engine must
// accept: in any order, some twice, and addresses listed with no names
// (which have none, as if not listed).
func (w *World) AddressNames(r *rand.Rand) map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for name, addrs := range w.Learned {
		for _, a := range addrs {
			out[a] = append(out[a], name)
			if r.IntN(8) == 0 {
				out[a] = append(out[a], name)
			}
		}
	}
	for _, a := range learnable {
		ns, ok := out[a]
		if !ok && r.IntN(8) == 0 {
			out[a] = nil
		}
		r.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
	}
	return out
}

// Engine is an engine computed afresh for w: its names learned before
// any rule (as after a restart), then its rules, then the endpoint.
func (w *World) Engine(r *rand.Rand) *policy.Engine {
	e := policy.NewEngine(w.EngineMode())
	e.UpsertIdentity(EndpointIdentity())
	e.SetFQDNNames(w.AddressNames(r))
	for i := range w.Rules {
		e.SetRules(Origin(i), []policy.Rule{w.EngineRule(i)})
	}
	e.UpsertEndpoint(policy.EndpointInfo{ID: EndpointID, Identity: EndpointIdentity().ID})
	return e
}

// EndpointID is the endpoint's ID.
const EndpointID = 1
