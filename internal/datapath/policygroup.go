package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// policyGroups is what the policy map holds, by policy group: loaded
// from the map once, then kept in step by every write through Maps.
type policyGroups struct {
	mu     sync.Mutex
	loaded bool
	keys   map[spec.PolicyGroup]map[PolicyKey]PolicyValue
}

func groupOf(k PolicyKey) spec.PolicyGroup {
	return spec.PolicyGroup{EndpointID: k.EpId, Direction: spec.Direction(k.Direction), Identity: identity.NumericIdentity(k.Identity)}
}

// loadLocked reads the map into the index the first time.
func (g *policyGroups) loadLocked(m *ebpf.Map) error {
	if g.loaded {
		return nil
	}
	keys := map[spec.PolicyGroup]map[PolicyKey]PolicyValue{}
	var k PolicyKey
	var v PolicyValue
	it := m.Iterate()
	for it.Next(&k, &v) {
		grp := groupOf(k)
		if keys[grp] == nil {
			keys[grp] = map[PolicyKey]PolicyValue{}
		}
		keys[grp][k] = v
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate policy: %w", err)
	}
	g.keys, g.loaded = keys, true
	return nil
}

// invalidate makes the next use read the map again: after writes that
// did not go through the index.
func (g *policyGroups) invalidate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loaded, g.keys = false, nil
}

// SetPolicyGroup makes the map's entries of group grp exactly entries
// (which must all belong to it), writing only the keys that change:
// denies first, then allows, then removals, so an allowed flow never
// sees a gap and a removed allow never outlives its deny. An update that
// does not fit is undone (the error wraps ErrMapFull). narrowed reports
// whether an allow went or became a deny: established connections may
// then have to be forgotten (FlushDisallowed).
func (m *Maps) SetPolicyGroup(grp spec.PolicyGroup, entries []spec.PolicyEntry) (narrowed bool, err error) {
	for i, e := range entries {
		if e.Group(grp.EndpointID) != grp {
			return false, fmt.Errorf("policy entry %d (%s) is not of group %+v", i, e, grp)
		}
	}
	desired, err := PolicyMapState(grp.EndpointID, entries)
	if err != nil {
		return false, err
	}
	g := m.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(m.Policy); err != nil {
		return false, err
	}
	current := g.keys[grp]
	keys := slices.SortedFunc(maps.Keys(desired), func(a, b PolicyKey) int {
		return cmp.Compare(desired[b].Flags&policyFlagDeny, desired[a].Flags&policyFlagDeny)
	})
	var written []PolicyKey
	for _, k := range keys {
		v := desired[k]
		cur, ok := current[k]
		if ok && cur == v {
			continue
		}
		if err := m.Policy.Put(&k, &v); err != nil {
			if uerr := m.undoPolicy(written, current); uerr != nil {
				g.loaded = false // the index no longer knows the map
				return false, fmt.Errorf("put policy entry for %+v: %w (and undo: %w)", grp, err, uerr)
			}
			return false, fmt.Errorf("put policy entry for %+v (old entries kept): %w", grp, markFull(err))
		}
		written = append(written, k)
		narrowed = narrowed || (ok && cur.Flags&policyFlagDeny == 0 && v.Flags&policyFlagDeny != 0)
	}
	for k, v := range current {
		if _, ok := desired[k]; ok {
			continue
		}
		if err := m.Policy.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			g.loaded = false
			return false, fmt.Errorf("delete policy entry for %+v: %w", grp, err)
		}
		narrowed = narrowed || v.Flags&policyFlagDeny == 0
	}
	if len(desired) == 0 {
		delete(g.keys, grp)
	} else {
		g.keys[grp] = desired
	}
	return narrowed, nil
}

// SyncPolicyGroups makes the whole map hold exactly the groups of
// desired, repairing what changed behind the index's back: the map is
// read again. It returns the endpoints whose policy narrowed.
func (m *Maps) SyncPolicyGroups(desired map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed []uint16, err error) {
	m.groups.invalidate()
	m.groups.mu.Lock()
	err = m.groups.loadLocked(m.Policy)
	var held []spec.PolicyGroup
	if err == nil {
		held = slices.Collect(maps.Keys(m.groups.keys))
	}
	m.groups.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var errs []error
	seen := map[uint16]bool{}
	set := func(grp spec.PolicyGroup, entries []spec.PolicyEntry) {
		n, err := m.SetPolicyGroup(grp, entries)
		errs = append(errs, err)
		if n && !seen[grp.EndpointID] {
			seen[grp.EndpointID] = true
			narrowed = append(narrowed, grp.EndpointID)
		}
	}
	for _, grp := range held {
		if _, ok := desired[grp]; !ok {
			set(grp, nil)
		}
	}
	for grp, entries := range desired {
		set(grp, entries)
	}
	return narrowed, errors.Join(errs...)
}

// FlushDisallowed forgets the endpoints' established connections that
// their policy maps no longer allow, judged by the map itself as the
// datapath judges a first packet.
func (m *Maps) FlushDisallowed(epIDs ...uint16) error {
	judges := map[uint16]policyJudge{}
	for _, ep := range epIDs {
		judges[ep] = func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) bool {
			return m.policyAllows(ep, dir, remote, cidr, proto, port)
		}
	}
	return m.forgetDisallowed(judges)
}

// policyAllows looks a packet up in the policy map: the remote identity,
// the wildcard and the CIDR identity, a deny of any winning.
func (m *Maps) policyAllows(epID uint16, dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) bool {
	ids := []identity.NumericIdentity{remote, identity.Unknown}
	if cidr != 0 {
		ids = append(ids, cidr)
	}
	matched := false
	for _, id := range ids {
		k := PolicyKey{Prefixlen: policyPrefixFull, Identity: uint32(id), EpId: epID, Direction: uint8(dir),
			Protocol: proto, Dport: htons(port)}
		var v PolicyValue
		if err := m.Policy.Lookup(&k, &v); err != nil {
			continue
		}
		if v.Flags&policyFlagDeny != 0 {
			return false
		}
		matched = true
	}
	return matched
}

// PolicyHas reports whether the map lets a first packet from or to a
// peer with identity remote through, as the datapath would judge it.
func (m *Maps) PolicyHas(epID uint16, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) bool {
	return m.policyAllows(epID, dir, remote, 0, proto, port)
}
