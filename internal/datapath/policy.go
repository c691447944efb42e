package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// portPrefix is a block of 2^(16-bits) ports starting at port.
type portPrefix struct {
	port uint16
	bits int
}

// portPrefixes covers lo..hi exactly with the fewest aligned blocks, which
// is how a range becomes longest-prefix-match keys.
func portPrefixes(lo, hi uint16) []portPrefix {
	var out []portPrefix
	for l := uint32(lo); l <= uint32(hi); {
		size := uint32(1) << 16
		if l != 0 {
			size = uint32(1) << bits.TrailingZeros32(l)
		}
		for l+size-1 > uint32(hi) {
			size >>= 1
		}
		out = append(out, portPrefix{port: uint16(l), bits: 16 - bits.TrailingZeros32(size)})
		l += size
	}
	return out
}

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
	for _, pp := range portPrefixes(e.Port, hi) {
		k := base
		k.Protocol = e.Protocol
		k.Dport = htons(pp.port)
		k.Prefixlen = policyPrefixProto + uint32(pp.bits)
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
			if old, ok := out[k]; ok && old.Flags&policyFlagDeny != 0 {
				continue // deny wins over an allow with the same key
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

// SetPolicy makes the endpoint's policy entries in the map equal to
// entries: it adds and changes what differs and removes the rest. Entries
// are added before stale ones go, so an allowed flow never sees a gap.
// An update that does not fit is undone, so the endpoint keeps its old
// policy whole (the error wraps ErrMapFull). Then established connections
// that the new policy no longer allows are forgotten: their next packet
// is judged as new, and dropped.
func (m *Maps) SetPolicy(epID uint16, entries []spec.PolicyEntry) error {
	defer m.groups.invalidate() // written around the group index
	desired, err := PolicyMapState(epID, entries)
	if err != nil {
		return err
	}
	current, err := m.PolicyState(epID)
	if err != nil {
		return err
	}
	// Denies go in first: while the update is under way, an allow is
	// never in without the deny that overrides it.
	keys := slices.SortedFunc(maps.Keys(desired), func(a, b PolicyKey) int {
		return cmp.Compare(desired[b].Flags&policyFlagDeny, desired[a].Flags&policyFlagDeny)
	})
	var written []PolicyKey
	for _, k := range keys {
		v := desired[k]
		if cur, ok := current[k]; ok && cur == v {
			continue
		}
		if err := m.Policy.Put(&k, &v); err != nil {
			if uerr := m.undoPolicy(written, current); uerr != nil {
				return fmt.Errorf("put policy entry for endpoint %d: %w (and undo: %w)", epID, err, uerr)
			}
			return fmt.Errorf("put policy entry for endpoint %d (%d entries, old policy kept): %w", epID, len(desired), markFull(err))
		}
		written = append(written, k)
	}
	for k := range current {
		if _, ok := desired[k]; ok {
			continue
		}
		if err := m.Policy.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete policy entry for endpoint %d: %w", epID, err)
		}
	}
	allows := func(dir spec.Direction, remote, cidr identity.NumericIdentity, proto uint8, port uint16) bool {
		return PolicyAllows(entries, dir, remote, cidr, proto, port)
	}
	if err := m.forgetDisallowed(map[uint16]policyJudge{epID: allows}); err != nil {
		return fmt.Errorf("endpoint %d: %w", epID, err)
	}
	return nil
}

// undoPolicy puts back what SetPolicy wrote over: old values, or nothing.
func (m *Maps) undoPolicy(written []PolicyKey, old map[PolicyKey]PolicyValue) error {
	var errs []error
	for _, k := range written {
		if v, ok := old[k]; ok {
			errs = append(errs, m.Policy.Put(&k, &v))
		} else if err := m.Policy.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PolicyState lists one endpoint's policy map entries.
func (m *Maps) PolicyState(epID uint16) (map[PolicyKey]PolicyValue, error) {
	out := map[PolicyKey]PolicyValue{}
	var k PolicyKey
	var v PolicyValue
	it := m.Policy.Iterate()
	for it.Next(&k, &v) {
		if k.EpId == epID {
			out[k] = v
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate policy: %w", err)
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
