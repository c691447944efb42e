package policy

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
)

// cidrKey names a CIDR identity: a prefix, for addresses of the world or
// (inCluster) for pods' and nodes' addresses inside a NetworkPolicy
// ipBlock.
type cidrKey struct {
	prefix    netip.Prefix
	inCluster bool
}

type cidrIdentity struct {
	id   *Identity
	refs int // the selectors that name the prefix
}

// cidrKeys are the identities a CIDR selector needs: one per prefix it
// names, excepts included (an address in an except must not fall back
// to the broader prefix's identity).
func (s CIDRSelector) cidrKeys() []cidrKey {
	var out []cidrKey
	for _, p := range append([]netip.Prefix{s.Prefix}, s.Except...) {
		out = append(out, cidrKey{p, false})
		if s.InCluster {
			out = append(out, cidrKey{p, true})
		}
	}
	return out
}

// acquire returns the cached form of s; a CIDR selector used for the
// first time takes references on the CIDR identities of its prefixes,
// making those that do not exist yet. The prefixes' identities are shared
// by every rule that names them.
func (e *Engine) acquire(s Selector) *cachedSelector {
	if cs, ok := e.cache.sels[s.Key()]; ok {
		return cs
	}
	if c, ok := s.(CIDRSelector); ok {
		for _, k := range c.cidrKeys() {
			ci := e.cidrs[k]
			if ci == nil {
				e.nextCIDR++
				ls := labels.Labels{}
				ls.Add(labels.New(labels.SourceCIDR, k.prefix.String(), ""))
				ci = &cidrIdentity{id: &Identity{ID: identity.LocalIdentityFlag | e.nextCIDR, Labels: ls,
					Prefix: k.prefix, InCluster: k.inCluster}}
				e.cidrs[k] = ci
				e.UpsertIdentity(ci.id)
				e.cidrsChanged = true
			}
			ci.refs++
		}
	}
	return e.cache.acquire(s)
}

// release drops a filter's use of cs; the last use of a CIDR selector
// drops its references. Identities left without one go at the next
// Flush, so that recomputing an endpoint does not renumber them.
func (e *Engine) release(cs *cachedSelector) {
	if len(cs.users) > 0 {
		return
	}
	e.cache.release(cs)
	if c, ok := cs.sel.(CIDRSelector); ok {
		for _, k := range c.cidrKeys() {
			e.cidrs[k].refs--
		}
	}
}

// collectCIDRs deletes the CIDR identities no selector names any more.
func (e *Engine) collectCIDRs() {
	for k, ci := range e.cidrs {
		if ci.refs <= 0 {
			delete(e.cidrs, k)
			e.DeleteIdentity(ci.id.ID)
			e.cidrsChanged = true
		}
	}
}

// Prefix is a prefix that rules name and the CIDR identity that the
// ipcache gives its addresses.
type Prefix struct {
	Prefix   netip.Prefix
	Identity identity.NumericIdentity
	// InCluster: the identity that pods' and nodes' addresses in the
	// prefix carry beside their own (NetworkPolicy's ipBlock).
	InCluster bool
}

// Prefixes are the prefixes that rules name with their CIDR identities,
// for the ipcache.
func (e *Engine) Prefixes() []Prefix {
	out := make([]Prefix, 0, len(e.cidrs))
	for _, k := range slices.SortedFunc(maps.Keys(e.cidrs), func(a, b cidrKey) int {
		return cmp.Or(a.prefix.Addr().Compare(b.prefix.Addr()), cmp.Compare(a.prefix.Bits(), b.prefix.Bits()),
			spec.CompareBools(a.inCluster, b.inCluster))
	}) {
		out = append(out, Prefix{Prefix: k.prefix, Identity: e.cidrs[k].id.ID, InCluster: k.inCluster})
	}
	return out
}

// ChangedPrefixes returns Prefixes when they changed since the last
// call, and whether they did: the ipcache needs them only then.
func (e *Engine) ChangedPrefixes() ([]Prefix, bool) {
	if !e.cidrsChanged {
		return nil, false
	}
	e.cidrsChanged = false
	return e.Prefixes(), true
}
