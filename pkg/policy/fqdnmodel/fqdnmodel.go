// Package fqdnmodel is a model of toFQDNs' meaning, written from the
// rules' semantics: whether an endpoint may open a connection to an
// address, given its egress rules (peers named by DNS names and patterns,
// by prefixes and by entities) and the names whose allowed DNS answers
// gave each address. It reasons on addresses and names alone, with no
// identities, prefixes of identities or selector cache, and shares
// nothing with the policy engine but pkg/fqdn's name and pattern matchers
// (tested on their own against a reference). Property tests (pkg/policy)
// check the engine's entries against it.
package fqdnmodel

import (
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/pkg/fqdn"
)

// Mode is the agent's enable-policy setting.
type Mode int

const (
	// ModeDefault isolates the endpoint once a rule that selects it says so.
	ModeDefault Mode = iota
	// ModeAlways isolates the endpoint.
	ModeAlways
	// ModeNever allows everything.
	ModeNever
)

// PeerKind is what a peer of a rule names.
type PeerKind int

const (
	// PeerName is toFQDNs' matchName.
	PeerName PeerKind = iota
	// PeerPattern is toFQDNs' matchPattern.
	PeerPattern
	// PeerCIDR is toCIDRSet: the addresses in Prefix and in no Except.
	PeerCIDR
	// PeerWorld is the entity world: every address outside the cluster.
	PeerWorld
	// PeerAll is the entity all: everyone.
	PeerAll
	// PeerPods is toEndpoints: pods, never an address of the world.
	PeerPods
)

// Peer is one peer of a rule.
type Peer struct {
	Kind PeerKind
	// Text is the matchName or matchPattern as written.
	Text   string
	Prefix netip.Prefix
	Except []netip.Prefix
	// InCluster makes a prefix peer a NetworkPolicy's ipBlock, which
	// selects pods' addresses in it too: for an address of the world,
	// the same as toCIDRSet.
	InCluster bool
}

// Port is one port of a rule: a packet of one of Protos (none: every
// protocol) to Port or to [Port, EndPort] (Port 0: every port).
type Port struct {
	Protos        []uint8
	Port, EndPort uint16
}

// Rule is an egress rule.
type Rule struct {
	// Selects: the rule's subject selects the endpoint. A rule that
	// does not select it is there to change nothing.
	Selects bool
	Deny    bool
	// Isolates is the rule's default deny: once a rule that selects the
	// endpoint isolates it, only what a rule allows is allowed.
	Isolates bool
	Peers    []Peer
	Ports    []Port // none: every protocol and port
}

// World is the endpoint's egress rules and what DNS taught.
type World struct {
	Mode  Mode
	Rules []Rule
	// Learned are the addresses that allowed DNS answers gave for each
	// name, the name as the answer spelled it.
	Learned map[string][]netip.Addr
}

// Allows says whether the endpoint may open a connection to dst (an
// address outside the cluster) with protocol proto and port: a deny that
// matches wins; else an allow that matches allows, and without one the
// connection is allowed only when no rule isolates the endpoint.
func (w *World) Allows(dst netip.Addr, proto uint8, port uint16) bool {
	if w.Mode == ModeNever {
		return true
	}
	isolated, allowed := w.Mode == ModeAlways, false
	names := w.NamesOf(dst)
	for _, r := range w.Rules {
		if !r.Selects {
			continue
		}
		isolated = isolated || r.Isolates
		if !matches(r, dst, names, proto, port) {
			continue
		}
		if r.Deny {
			return false
		}
		allowed = true
	}
	return allowed || !isolated
}

// matches says whether r matches a packet to dst, an address learned
// for names, with proto and port.
func matches(r Rule, dst netip.Addr, names []string, proto uint8, port uint16) bool {
	peer := slices.ContainsFunc(r.Peers, func(p Peer) bool { return p.matches(dst, names) })
	return peer && (len(r.Ports) == 0 || slices.ContainsFunc(r.Ports, func(p Port) bool { return p.matches(proto, port) }))
}

// matches: a name or a pattern matches an address by the names it was
// learned for, each alone; never by another name that resolves to it
// too.
func (p Peer) matches(dst netip.Addr, names []string) bool {
	switch p.Kind {
	case PeerName:
		n, err := fqdn.ParseName(p.Text)
		return err == nil && slices.ContainsFunc(names, n.Matches)
	case PeerPattern:
		pat, err := fqdn.ParsePattern(p.Text)
		return err == nil && slices.ContainsFunc(names, pat.Matches)
	case PeerCIDR:
		return p.Prefix.Contains(dst) && !slices.ContainsFunc(p.Except, func(e netip.Prefix) bool { return e.Contains(dst) })
	case PeerWorld, PeerAll:
		return true
	}
	return false
}

// NamesOf are the names learned for dst.
func (w *World) NamesOf(dst netip.Addr) []string {
	var out []string
	for name, addrs := range w.Learned {
		if slices.Contains(addrs, dst) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (p Port) matches(proto uint8, port uint16) bool {
	if len(p.Protos) > 0 && !slices.Contains(p.Protos, proto) {
		return false
	}
	return p.Port == 0 || port >= p.Port && port <= max(p.Port, p.EndPort)
}
