package policy

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// Identity is an identity as selectors see it: its number, its labels,
// and for a CIDR identity the prefix it stands for.
type Identity struct {
	ID     identity.NumericIdentity
	Labels labels.Labels
	// Prefix is set on CIDR identities (node-local, LocalIdentityFlag).
	Prefix netip.Prefix
	// InCluster marks the CIDR identity that a pod's or node's address
	// carries beside its own identity, for the prefixes of NetworkPolicy
	// ipBlocks: those match pods and nodes too, CIDR rules of Cilium's
	// policies do not.
	InCluster bool
	// Names are the DNS names whose answers gave the address of a
	// single-address CIDR identity, which toFQDNs selectors select by.
	Names []string
}

// Selector selects identities. Selectors with equal keys select the same
// identities, so the selector cache keeps one set per key.
type Selector interface {
	Key() string
	Selects(id *Identity) bool
}

// Wildcard selects every peer, known or not: its entries carry
// identity.Unknown, which the datapath matches for any identity.
type Wildcard struct{}

func (Wildcard) Key() string               { return "*" }
func (Wildcard) Selects(id *Identity) bool { return id.ID == identity.Unknown }

// IdentitySet selects the listed identities: entities, which are reserved
// identities or fixed sets of them.
type IdentitySet struct {
	Name string // what the set stands for, e.g. "entity:host"
	IDs  []identity.NumericIdentity
}

func (s IdentitySet) Key() string               { return s.Name }
func (s IdentitySet) Selects(id *Identity) bool { return slices.Contains(s.IDs, id.ID) }

// LabelSelector selects the identities of endpoints by their labels,
// optionally only those in one namespace. It never selects CIDR
// identities, and selects reserved identities only by their reserved
// labels (e.g. "reserved:host"), as Cilium's endpoint selectors do.
type LabelSelector struct {
	Selector api.EndpointSelector
	// Namespace, when set, is required of the pod namespace label.
	Namespace string
}

// Key is a canonical form of the selector: JSON marshals map keys in
// order, and expressions are kept in their written order, which can only
// make two equal selectors share less, never unequal ones share.
func (s LabelSelector) Key() string {
	b, _ := json.Marshal(s.Selector)
	if s.Namespace != "" {
		return "ns=" + s.Namespace + ":" + string(b)
	}
	return string(b)
}

func (s LabelSelector) Selects(id *Identity) bool {
	if id.Prefix.IsValid() || id.ID == identity.Unknown {
		return false
	}
	if s.Namespace != "" {
		l, ok := id.Labels[labels.KeyPodNamespace]
		if !ok || l.Source != labels.SourceK8s || l.Value != s.Namespace {
			return false
		}
	}
	if id.ID.IsReserved() && !mentionsReserved(&s.Selector) {
		return false
	}
	return s.Selector.Matches(id.Labels)
}

func mentionsReserved(s *api.EndpointSelector) bool {
	for k := range s.MatchLabels {
		if strings.HasPrefix(k, labels.SourceReserved+":") {
			return true
		}
	}
	for _, e := range s.MatchExpressions {
		if strings.HasPrefix(e.Key, labels.SourceReserved+":") {
			return true
		}
	}
	return false
}

// CIDRSelector selects the CIDR identities of prefixes inside Prefix and
// outside every Except. With InCluster it also selects the CIDR identities
// that pods' and nodes' addresses carry: NetworkPolicy's ipBlock.
type CIDRSelector struct {
	Prefix    netip.Prefix
	Except    []netip.Prefix
	InCluster bool
}

func (s CIDRSelector) Key() string {
	var b strings.Builder
	b.WriteString("cidr:")
	b.WriteString(s.Prefix.String())
	for _, e := range s.Except {
		b.WriteString(" except ")
		b.WriteString(e.String())
	}
	if s.InCluster {
		b.WriteString(" in-cluster")
	}
	return b.String()
}

func (s CIDRSelector) Selects(id *Identity) bool {
	if !id.Prefix.IsValid() {
		// The whole address space selects the world, as in Cilium. An
		// address has the world identity only when no prefix of any rule
		// holds it, so no except of this selector holds it either.
		return s.Prefix.Bits() == 0 && s.Prefix.Addr().Is4() &&
			(id.ID == identity.World || id.ID == identity.WorldIPv4)
	}
	if id.InCluster && !s.InCluster {
		return false
	}
	if !contains(s.Prefix, id.Prefix) {
		return false
	}
	for _, e := range s.Except {
		if contains(e, id.Prefix) {
			return false
		}
	}
	return true
}

// contains reports whether every address of q is in p.
func contains(p, q netip.Prefix) bool {
	return p.Bits() <= q.Bits() && p.Contains(q.Addr())
}

// FQDNSelector selects the CIDR identities of addresses learned from
// allowed DNS answers for the names that match it (toFQDNs). An address
// is selected by the name it was learned for, never by another name that
// resolves to it too.
type FQDNSelector struct {
	Rule  DNSRule
	match func(string) bool
}

// NewFQDNSelector returns the selector of a toFQDNs entry.
func NewFQDNSelector(r DNSRule) FQDNSelector {
	return FQDNSelector{Rule: r, match: r.Matcher()}
}

func (s FQDNSelector) Key() string {
	if s.Rule.MatchName != "" {
		return "fqdn:name=" + fqdn.Normalize(s.Rule.MatchName)
	}
	return "fqdn:pattern=" + s.Rule.MatchPattern
}

func (s FQDNSelector) Selects(id *Identity) bool {
	match := s.match
	if match == nil {
		match = s.Rule.Matcher()
	}
	return id.Prefix.IsValid() && slices.ContainsFunc(id.Names, match)
}
