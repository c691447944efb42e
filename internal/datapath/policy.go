package datapath

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

func policyKeys(epID uint16, e spec.PolicyEntry) []PolicyKey {
	base := PolicyKey{Identity: uint32(e.Identity), EpId: epID, Direction: uint8(e.Direction)}
	switch {
	case e.Protocol == 0:
		base.Prefixlen = policyPrefixStatic
		return []PolicyKey{base}
	case e.Port == 0:
		base.Prefixlen = policyPrefixProto
		base.Protocol = e.Protocol
		return []PolicyKey{base}
	}
	hi := max(e.EndPort, e.Port)
	var out []PolicyKey
	for _, pp := range spec.PortPrefixes(e.Port, hi) {
		k := base
		k.Protocol = e.Protocol
		k.Dport = htons(pp.Port)
		k.Prefixlen = policyPrefixProto + uint32(pp.Bits)
		out = append(out, k)
	}
	return out
}

// policyBits are the wildcardable bits of a key, protocol then port, left
// aligned in 24 bits, so that prefix containment is a mask comparison.
func policyBits(k PolicyKey) (uint32, int) {
	v := uint32(k.Protocol)<<16 | uint32(htons(k.Dport))
	return v, int(k.Prefixlen) - int(policyPrefixStatic)
}

// covers reports whether every packet matching b also matches a.
func covers(a, b PolicyKey) bool {
	if a.Identity != b.Identity || a.EpId != b.EpId || a.Direction != b.Direction {
		return false
	}
	av, al := policyBits(a)
	bv, bl := policyBits(b)
	if al > bl {
		return false
	}
	mask := ^uint32(0) << (24 - al) & 0xffffff
	if al == 0 {
		mask = 0
	}
	return av&mask == bv&mask
}

// PolicyMapState computes the map entries for one endpoint. An allow key
// nested inside a deny of the same identity becomes a deny: the kernel's
// longest-prefix match would otherwise pick the narrower allow.
func PolicyMapState(epID uint16, entries []spec.PolicyEntry) (map[PolicyKey]PolicyValue, error) {
	out := map[PolicyKey]PolicyValue{}
	var denies []PolicyKey
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("policy entry %d (%s): %w", i, e, err)
		}
		v := PolicyValue{ProxyPort: e.ProxyPort, Cookie: e.Cookie}
		if e.Deny {
			v.Flags = policyFlagDeny
		}
		for _, k := range policyKeys(epID, e) {
			// A deny wins over an allow with the same key, and an allow
			// that sends to the proxy over one that does not: its
			// layer-7 rules are never bypassed (the proxy lets through
			// what the other allow allows).
			if old, ok := out[k]; ok && (old.Flags&policyFlagDeny != 0 || !e.Deny && old.ProxyPort != 0) {
				continue
			}
			out[k] = v
			if e.Deny {
				denies = append(denies, k)
			}
		}
	}
	for k, v := range out {
		if v.Flags&policyFlagDeny != 0 {
			continue
		}
		if i := slices.IndexFunc(denies, func(d PolicyKey) bool { return covers(d, k) }); i >= 0 {
			out[k] = PolicyValue{Flags: policyFlagDeny, Cookie: out[denies[i]].Cookie}
		}
	}
	return out, nil
}

// SetPolicy makes the endpoint's whole policy entries, as UpdatePolicy
// writes it (an update that does not fit leaves the old policy whole,
// ErrMapFull). Then established connections that the new policy no
// longer allows are forgotten: their next packet is judged as new, and
// dropped.
func (m *Maps) SetPolicy(epID uint16, entries []spec.PolicyEntry) error {
	groups := map[spec.PolicyGroup][]spec.PolicyEntry{}
	for _, e := range entries {
		groups[e.Group(epID)] = append(groups[e.Group(epID)], e)
	}
	m.groups.mu.Lock()
	err := m.groups.loadLocked(m.Policy)
	if p := m.groups.eps[epID]; err == nil && p != nil {
		for grp := range p.groups {
			if _, ok := groups[grp]; !ok {
				groups[grp] = nil
			}
		}
	}
	m.groups.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := m.UpdatePolicy(epID, groups); err != nil {
		return err
	}
	allows := func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) judgement {
		return policyJudgement(entries, dir, remote, cidr, proto, port)
	}
	if err := m.forgetDisallowed(map[uint16]policyJudge{epID: allows}); err != nil {
		return fmt.Errorf("endpoint %d: %w", epID, err)
	}
	return nil
}

// PolicyState lists one endpoint's policy map entries, as the map holds
// them.
func (m *Maps) PolicyState(epID uint16) (map[PolicyKey]PolicyValue, error) {
	out := map[PolicyKey]PolicyValue{}
	mp, err := m.policyMapOf(epID)
	if err != nil || mp == nil {
		return out, err
	}
	defer mp.Close()
	var k PolicyKey
	var v PolicyValue
	it := mp.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate policy of endpoint %d: %w", epID, err)
	}
	return out, nil
}

// PolicyEntries reads one endpoint's policy back as entries, one per map
// key: a port range that SetPolicy split into aligned blocks comes back as
// those blocks.
func (m *Maps) PolicyEntries(epID uint16) ([]spec.PolicyEntry, error) {
	state, err := m.PolicyState(epID)
	if err != nil {
		return nil, err
	}
	out := make([]spec.PolicyEntry, 0, len(state))
	for k, v := range state {
		out = append(out, policyEntryOf(k, v))
	}
	slices.SortFunc(out, func(a, b spec.PolicyEntry) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Identity, b.Identity),
			cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), cmp.Compare(a.EndPort, b.EndPort))
	})
	return out, nil
}

// policyEntryOf undoes PolicyEntry.keys for one key.
func policyEntryOf(k PolicyKey, v PolicyValue) spec.PolicyEntry {
	e := spec.PolicyEntry{Direction: spec.Direction(k.Direction), Identity: identity.NumericIdentity(k.Identity),
		Deny: v.Flags&policyFlagDeny != 0, ProxyPort: v.ProxyPort, Cookie: v.Cookie}
	if k.Prefixlen < policyPrefixProto {
		return e
	}
	e.Protocol = k.Protocol
	bits := int(k.Prefixlen) - int(policyPrefixProto)
	if bits <= 0 {
		return e
	}
	e.Port = htons(k.Dport)
	if bits < 16 {
		e.EndPort = e.Port + uint16(1)<<(16-bits) - 1
	}
	return e
}
