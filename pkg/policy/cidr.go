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

// used says whether anything needs the identity: a selector that names
// its prefix, or names learned for its address (toFQDNs).
func (ci *cidrIdentity) used() bool { return ci.refs > 0 || len(ci.id.Names) > 0 }

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
			e.cidrIdentity(k).refs++
		}
	}
	return e.cache.acquire(s)
}

// cidrIdentity returns the CIDR identity of k, making it if it does not
// exist yet: with the number the prefix had before a restart
// (RestoreCIDRIdentities), or a new one.
func (e *Engine) cidrIdentity(k cidrKey) *cidrIdentity {
	ci := e.cidrs[k]
	if ci == nil {
		id, ok := e.restoredCIDRs[k.prefix]
		if _, taken := e.cidrIDs[id]; !ok || k.inCluster || taken {
			id = e.newCIDRID()
		}
		ls := labels.Labels{}
		ls.Add(labels.New(labels.SourceCIDR, k.prefix.String(), ""))
		ci = &cidrIdentity{id: &Identity{ID: id, Labels: ls, Prefix: k.prefix, InCluster: k.inCluster}}
		e.cidrs[k] = ci
		e.cidrIDs[id] = struct{}{}
		e.UpsertIdentity(ci.id)
		e.cidrsChanged = true
	}
	return ci
}

// newCIDRID is a CIDR identity number that no prefix has, nor had before
// a restart.
func (e *Engine) newCIDRID() identity.NumericIdentity {
	for {
		e.nextCIDR++
		id := identity.LocalIdentityFlag | e.nextCIDR
		_, taken := e.cidrIDs[id]
		if _, restored := e.restoredIDs[id]; !taken && !restored {
			return id
		}
	}
}

// RestoreCIDRIdentities gives the CIDR identities of before a restart
// (the datapath's ipcache holds them) to their prefixes again as the
// prefixes come back, and their numbers to no other prefix: a
// connection that the datapath judged by a prefix's identity, or that
// the proxy holds open, goes on across the restart. Call it before the
// first rules and names.
func (e *Engine) RestoreCIDRIdentities(ids map[netip.Prefix]identity.NumericIdentity) {
	e.restoredCIDRs = maps.Clone(ids)
	e.restoredIDs = map[identity.NumericIdentity]struct{}{}
	for _, id := range ids {
		e.restoredIDs[id] = struct{}{}
	}
}

// SetFQDNNames makes names the DNS names whose allowed answers gave each
// address (toFQDNs): an address gets the CIDR identity of its own /32
// prefix, which carries its names, and toFQDNs selectors select it by
// them. An address no longer listed loses its names, and its identity
// goes at the next Flush unless a CIDR rule names the prefix too.
func (e *Engine) SetFQDNNames(names map[netip.Addr][]string) {
	set := func(a netip.Addr, ns []string) {
		k := cidrKey{prefix: netip.PrefixFrom(a, a.BitLen())}
		ci := e.cidrs[k]
		if ci == nil && len(ns) == 0 {
			return
		}
		if ci == nil {
			ci = e.cidrIdentity(k)
		}
		if slices.Equal(ci.id.Names, ns) {
			return
		}
		id := *ci.id
		id.Names = ns
		ci.id = &id
		e.UpsertIdentity(ci.id)
	}
	for a := range e.fqdnNames {
		if _, ok := names[a]; !ok {
			set(a, nil)
		}
	}
	for a, ns := range names {
		ns = slices.Sorted(slices.Values(ns))
		set(a, slices.Compact(ns))
	}
	e.fqdnNames = maps.Clone(names)
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
		if !ci.used() {
			delete(e.cidrs, k)
			delete(e.cidrIDs, ci.id.ID)
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
