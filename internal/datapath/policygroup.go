package datapath

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Each endpoint's policy is a map of its own (an inner map of
// Maps.Policy, keyed by endpoint id): one endpoint's policy never takes
// the room another's needs. policyGroups indexes what those maps hold,
// by endpoint and policy group, so that an update is written without
// reading a map: loaded from the maps once, then kept in step by every
// write through Maps.
type policyGroups struct {
	mu     sync.Mutex
	loaded bool
	eps    map[uint16]*endpointPolicy
	// max is the size of the maps made from now on.
	max uint32
}

// endpointPolicy is what one endpoint's map holds.
type endpointPolicy struct {
	m      *ebpf.Map
	groups map[spec.PolicyGroup]map[PolicyKey]PolicyValue
	n      int // keys in all groups
}

func groupOf(k PolicyKey) spec.PolicyGroup {
	return spec.PolicyGroup{EndpointID: k.EpId, Direction: spec.Direction(k.Direction), Identity: identity.NumericIdentity(k.Identity)}
}

// loadLocked reads the maps into the index the first time.
func (g *policyGroups) loadLocked(outer *ebpf.Map) error {
	if g.loaded {
		return nil
	}
	g.closeLocked()
	eps := map[uint16]*endpointPolicy{}
	var ep uint32
	var id ebpf.MapID
	it := outer.Iterate()
	for it.Next(&ep, &id) {
		inner, err := ebpf.NewMapFromID(id)
		if err != nil {
			closeAll(eps)
			return fmt.Errorf("open policy map of endpoint %d: %w", ep, err)
		}
		p := &endpointPolicy{m: inner, groups: map[spec.PolicyGroup]map[PolicyKey]PolicyValue{}}
		eps[uint16(ep)] = p
		var k PolicyKey
		var v PolicyValue
		kit := inner.Iterate()
		for kit.Next(&k, &v) {
			grp := groupOf(k)
			if p.groups[grp] == nil {
				p.groups[grp] = map[PolicyKey]PolicyValue{}
			}
			p.groups[grp][k] = v
			p.n++
		}
		if err := kit.Err(); err != nil {
			closeAll(eps)
			return fmt.Errorf("iterate policy map of endpoint %d: %w", ep, err)
		}
	}
	if err := it.Err(); err != nil {
		closeAll(eps)
		return fmt.Errorf("iterate policy maps: %w", err)
	}
	g.eps, g.loaded = eps, true
	return nil
}

func closeAll(eps map[uint16]*endpointPolicy) {
	for _, p := range eps {
		p.m.Close()
	}
}

// closeLocked forgets the index and closes the maps' handles.
func (g *policyGroups) closeLocked() {
	closeAll(g.eps)
	g.eps, g.loaded = nil, false
}

// invalidate makes the next use read the maps again: after writes that
// did not go through the index, or failed half way.
func (g *policyGroups) invalidate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closeLocked()
}

// PolicyMapName is the name an endpoint's policy map goes by in metrics
// and the API, Cilium's form.
func PolicyMapName(ep uint16) string { return fmt.Sprintf("cilium_policy_%05d", ep) }

// newPolicyMap makes an empty endpoint policy map of the current size.
func (m *Maps) newPolicyMap(ep uint16) (*ebpf.Map, error) {
	s := m.policyInner.Copy()
	s.MaxEntries = m.groups.max
	mp, err := ebpf.NewMap(s)
	if err != nil {
		return nil, fmt.Errorf("create policy map of endpoint %d: %w", ep, err)
	}
	return mp, nil
}

// UpdatePolicy makes the endpoint's policy groups named in groups hold
// exactly their entries (none: the group goes); the endpoint's other
// groups stay. Whatever happens, the endpoint is never more open than
// both its old and its new policy, even half way and on failure:
//   - first what closes: allows removed, allows that become denies, new
//     denies; then what opens: denies that become allows, denies
//     removed, new allows;
//   - when the map cannot hold the update at its fullest moment, a new
//     map with the whole new policy replaces it at once;
//   - a policy larger than the maps' size is refused whole (ErrMapFull),
//     and the old one stays.
//
// narrowed reports that an allow went or became a deny: established
// connections may have to be forgotten (FlushDisallowed).
func (m *Maps) UpdatePolicy(ep uint16, groups map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed bool, err error) {
	desired := map[spec.PolicyGroup]map[PolicyKey]PolicyValue{}
	for grp, entries := range groups {
		if grp.EndpointID != ep {
			return false, fmt.Errorf("policy group %+v is not of endpoint %d", grp, ep)
		}
		for i, e := range entries {
			if e.Group(ep) != grp {
				return false, fmt.Errorf("policy entry %d (%s) is not of group %+v", i, e, grp)
			}
		}
		state, err := PolicyMapState(ep, entries)
		if err != nil {
			return false, err
		}
		desired[grp] = state
	}
	g := m.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(m.Policy); err != nil {
		return false, err
	}
	narrowed, err = m.updateLocked(ep, desired)
	if err != nil && !errors.Is(err, ErrMapFull) {
		g.closeLocked() // the index may no longer know the map
	}
	return narrowed, err
}

// policyOp is one write of an update: a key in (with its value) or out.
type policyOp struct {
	key   PolicyKey
	value PolicyValue
	del   bool
}

// policyPlan is an update's writes in the order that keeps the endpoint
// within its old and its new policy: first what closes (allows out,
// allows that become denies, new denies in), then what opens (denies
// out, denies that become allows, new allows in). Every state on the way
// allows only what the old policy allowed, in the first half, or what
// the new one allows, in the second: a longest-prefix match in a group
// picks an allow only if both policies have that key as an allow, or the
// half's own policy has it.
type policyPlan struct {
	ops         []policyOp
	peak, final int // keys at the fullest moment and at the end
	narrowed    bool
}

func planPolicy(cur *endpointPolicy, desired map[spec.PolicyGroup]map[PolicyKey]PolicyValue) policyPlan {
	var p policyPlan
	var closeDel, closePut, openDel, openPut []policyOp
	isDeny := func(v PolicyValue) bool { return v.Flags&policyFlagDeny != 0 }
	for grp, want := range desired {
		var have map[PolicyKey]PolicyValue
		if cur != nil {
			have = cur.groups[grp]
		}
		for k, v := range have {
			if _, ok := want[k]; ok {
				continue
			}
			if isDeny(v) {
				openDel = append(openDel, policyOp{key: k, del: true})
			} else {
				closeDel = append(closeDel, policyOp{key: k, del: true})
				p.narrowed = true
			}
		}
		for k, v := range want {
			old, ok := have[k]
			switch {
			case ok && old == v:
			case isDeny(v):
				closePut = append(closePut, policyOp{key: k, value: v})
				p.narrowed = p.narrowed || (ok && !isDeny(old))
			default:
				openPut = append(openPut, policyOp{key: k, value: v})
			}
		}
	}
	p.ops = slices.Concat(closeDel, closePut, openDel, openPut)
	n := 0
	if cur != nil {
		n = cur.n
	}
	p.peak = n
	for _, op := range p.ops {
		if _, ok := cur.key(op.key); op.del {
			n--
		} else if !ok {
			n++
		}
		p.peak = max(p.peak, n)
	}
	p.final = n
	return p
}

// key returns what p's map holds at k.
func (p *endpointPolicy) key(k PolicyKey) (PolicyValue, bool) {
	if p == nil {
		return PolicyValue{}, false
	}
	v, ok := p.groups[groupOf(k)][k]
	return v, ok
}

func (m *Maps) updateLocked(ep uint16, desired map[spec.PolicyGroup]map[PolicyKey]PolicyValue) (bool, error) {
	g := m.groups
	cur := g.eps[ep]
	plan := planPolicy(cur, desired)
	if plan.final > int(g.max) {
		return false, fmt.Errorf("policy of endpoint %d needs %d policy map entries, more than %d (--bpf-policy-map-max): %w",
			ep, plan.final, g.max, ErrMapFull)
	}
	if len(plan.ops) == 0 {
		return false, nil
	}
	if cur == nil || plan.peak > int(cur.m.MaxEntries()) {
		return plan.narrowed, m.replacePolicyLocked(ep, cur, desired)
	}
	for _, op := range plan.ops {
		if op.del {
			if err := cur.m.Delete(&op.key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return false, fmt.Errorf("delete policy entry of endpoint %d: %w", ep, err)
			}
		} else if err := cur.m.Put(&op.key, &op.value); err != nil {
			return false, fmt.Errorf("put policy entry of endpoint %d: %w", ep, markFull(err))
		}
	}
	cur.set(desired)
	return plan.narrowed, nil
}

// set records that groups now hold desired (empty: gone).
func (p *endpointPolicy) set(desired map[spec.PolicyGroup]map[PolicyKey]PolicyValue) {
	for grp, want := range desired {
		p.n += len(want) - len(p.groups[grp])
		if len(want) == 0 {
			delete(p.groups, grp)
		} else {
			p.groups[grp] = want
		}
	}
}

// replacePolicyLocked writes the endpoint's whole new policy (cur's
// groups with desired's in their place) into a new map, and puts that
// in place of cur's at once.
func (m *Maps) replacePolicyLocked(ep uint16, cur *endpointPolicy, desired map[spec.PolicyGroup]map[PolicyKey]PolicyValue) error {
	next := &endpointPolicy{groups: map[spec.PolicyGroup]map[PolicyKey]PolicyValue{}}
	if cur != nil {
		maps.Copy(next.groups, cur.groups)
		next.n = cur.n
	}
	next.set(desired)
	mp, err := m.newPolicyMap(ep)
	if err != nil {
		return err
	}
	for _, want := range next.groups {
		for k, v := range want {
			if err := mp.Put(&k, &v); err != nil {
				mp.Close()
				return fmt.Errorf("fill policy map of endpoint %d: %w", ep, markFull(err))
			}
		}
	}
	key := uint32(ep)
	if err := m.Policy.Put(&key, mp); err != nil {
		mp.Close()
		return fmt.Errorf("install policy map of endpoint %d: %w", ep, err)
	}
	next.m = mp
	if cur != nil {
		cur.m.Close()
	}
	m.groups.eps[ep] = next
	return nil
}

// DeletePolicy removes an endpoint's policy map: a gone endpoint's.
func (m *Maps) DeletePolicy(ep uint16) error {
	g := m.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	key := uint32(ep)
	if err := m.Policy.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete policy map of endpoint %d: %w", ep, err)
	}
	if p, ok := g.eps[ep]; ok {
		p.m.Close()
		delete(g.eps, ep)
	}
	return nil
}

// SyncPolicy makes the maps hold exactly the groups of desired,
// repairing what changed behind the index's back: the maps are read
// again. Endpoints with no group lose their map. It returns the
// endpoints whose policy narrowed.
func (m *Maps) SyncPolicy(desired map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed []uint16, err error) {
	m.groups.invalidate()
	m.groups.mu.Lock()
	err = m.groups.loadLocked(m.Policy)
	held := map[uint16][]spec.PolicyGroup{}
	if err == nil {
		for ep, p := range m.groups.eps {
			held[ep] = slices.Collect(maps.Keys(p.groups))
		}
	}
	m.groups.mu.Unlock()
	if err != nil {
		return nil, err
	}
	byEP := map[uint16]map[spec.PolicyGroup][]spec.PolicyEntry{}
	for grp, entries := range desired {
		if byEP[grp.EndpointID] == nil {
			byEP[grp.EndpointID] = map[spec.PolicyGroup][]spec.PolicyEntry{}
		}
		byEP[grp.EndpointID][grp] = entries
	}
	var errs []error
	for ep, groups := range held {
		if _, ok := byEP[ep]; !ok {
			errs = append(errs, m.DeletePolicy(ep))
			narrowed = append(narrowed, ep)
			continue
		}
		for _, grp := range groups {
			if _, ok := byEP[ep][grp]; !ok {
				byEP[ep][grp] = nil
			}
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(byEP)) {
		n, err := m.UpdatePolicy(ep, byEP[ep])
		errs = append(errs, err)
		if n {
			narrowed = append(narrowed, ep)
		}
	}
	return narrowed, errors.Join(errs...)
}

// FlushDisallowed forgets the endpoints' established connections that
// their policy maps no longer allow, judged by the map itself as the
// datapath judges a first packet.
func (m *Maps) FlushDisallowed(epIDs ...uint16) error {
	judges := map[uint16]policyJudge{}
	for _, ep := range epIDs {
		judges[ep] = func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) judgement {
			return m.policyJudgement(ep, dir, remote, cidr, proto, port)
		}
	}
	return m.forgetDisallowed(judges)
}

// policyJudgement looks a packet up in the endpoint's policy map: the
// remote identity, the wildcard and the CIDR identity, a deny of any
// winning, an allow with a proxy port sending to the proxy. No map allows
// nothing.
func (m *Maps) policyJudgement(epID uint16, dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) judgement {
	mp, err := m.policyMapOf(epID)
	if err != nil || mp == nil {
		return judgement{}
	}
	defer mp.Close()
	ids := []identity.NumericIdentity{remote, identity.Unknown}
	if cidr != 0 {
		ids = append(ids, cidr)
	}
	var j judgement
	for _, id := range ids {
		k := PolicyKey{Prefixlen: policyPrefixFull, Identity: uint32(id), EpId: epID, Direction: uint8(dir),
			Protocol: proto, Dport: htons(port)}
		var v PolicyValue
		if err := mp.Lookup(&k, &v); err != nil {
			continue
		}
		if v.Flags&policyFlagDeny != 0 {
			return judgement{}
		}
		j.allowed = true
		j.proxyPort = max(j.proxyPort, v.ProxyPort)
	}
	return j
}

// policyMapOf opens the endpoint's policy map as the datapath finds it,
// nil when it has none. The caller closes it.
func (m *Maps) policyMapOf(ep uint16) (*ebpf.Map, error) {
	key := uint32(ep)
	var id ebpf.MapID
	if err := m.Policy.Lookup(&key, &id); errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("policy map of endpoint %d: %w", ep, err)
	}
	mp, err := ebpf.NewMapFromID(id)
	if err != nil {
		return nil, fmt.Errorf("open policy map of endpoint %d: %w", ep, err)
	}
	return mp, nil
}

// PolicyHas reports whether the map lets a first packet from or to a
// peer with identity remote through, as the datapath would judge it.
func (m *Maps) PolicyHas(epID uint16, dir spec.Direction, remote identity.NumericIdentity, proto uint8, port uint16) bool {
	return m.policyJudgement(epID, dir, remote, 0, proto, port).allowed
}
