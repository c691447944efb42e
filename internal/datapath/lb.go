package datapath

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// The service maps' key and value layouts, from bpf/lib/lb.h.
type (
	LB4Key            = lxcLb4Key
	LB4Service        = lxcLb4Service
	LB4Backend        = lxcLb4Backend
	LB4ReverseNAT     = lxcLb4ReverseNat
	LB4SourceRangeKey = lxcLb4SourceRangeKey
)

// HairpinIPv4 is the source a pod's packets to itself through a service
// arrive from (bpf/lib/lb_xlate.h): a link-local address no pod may send
// from, and which the control plane must give to nothing else.
var HairpinIPv4 = addrOfBE32(htonl(uint32(lxcLbHairpinLB_HAIRPIN_IPV4)))

const (
	lbBackendActive      = uint8(lxcLbBackendStateLB_BACKEND_ACTIVE)
	lbBackendTerminating = uint8(lxcLbBackendStateLB_BACKEND_TERMINATING)
)

// UpsertBackend writes one backend.
func (m *Maps) UpsertBackend(b spec.Backend) error {
	if err := b.Validate(); err != nil {
		return err
	}
	v := LB4Backend{Address: be32(b.Address), Port: htons(b.Port), Proto: b.Protocol, State: lbBackendActive}
	if b.Terminating {
		v.State = lbBackendTerminating
	}
	id := uint32(b.ID)
	if err := m.LB4Backends.Put(&id, &v); err != nil {
		return fmt.Errorf("put backend %d: %w", b.ID, markFull(err))
	}
	return nil
}

// DeleteBackend removes one backend; a missing one is no error.
func (m *Maps) DeleteBackend(id spec.BackendID) error {
	k := uint32(id)
	if err := m.LB4Backends.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete backend %d: %w", id, err)
	}
	return nil
}

// Backends lists the backends map.
func (m *Maps) Backends() (map[spec.BackendID]spec.Backend, error) {
	out := map[spec.BackendID]spec.Backend{}
	var k uint32
	var v LB4Backend
	it := m.LB4Backends.Iterate()
	for it.Next(&k, &v) {
		out[spec.BackendID(k)] = backendOf(spec.BackendID(k), v)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate backends: %w", err)
	}
	return out, nil
}

func backendOf(id spec.BackendID, v LB4Backend) spec.Backend {
	return spec.Backend{ID: id, Address: addrOfBE32(v.Address), Port: htons(v.Port), Protocol: v.Proto,
		Terminating: v.State == lbBackendTerminating}
}

func lbKey(f spec.Frontend, slot uint16) LB4Key {
	return LB4Key{Address: be32(f.Address), Dport: htons(f.Port), BackendSlot: slot, Proto: f.Protocol, Scope: uint8(f.Scope)}
}

// UpsertService makes the frontend's entries say s. A packet looking up
// the frontend meanwhile finds the old service or the new one, never a
// slot without its backend: a growing service gets its new slots before
// its count, a shrinking one loses its slots after. Its Maglev table is
// written before the entry that names it and removed after the entry
// that no longer does; the entry names the new backends only once the
// table holds them, but the table may name them before: a packet that
// picks a backend not written yet is served at random.
func (m *Maps) UpsertService(s spec.Service) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Maglev != nil {
		if err := m.upsertMaglev(s.RevNATIndex, s.Maglev); err != nil {
			return err
		}
	}
	var old LB4Service
	k0 := lbKey(s.Frontend, 0)
	if err := m.LB4Services.Lookup(&k0, &old); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("lookup service %s: %w", s.Frontend, err)
	}
	for i, id := range s.Backends {
		k := lbKey(s.Frontend, uint16(i+1))
		v := LB4Service{BackendId: uint32(id), RevNatIndex: s.RevNATIndex}
		if err := m.LB4Services.Put(&k, &v); err != nil {
			return fmt.Errorf("put service %s slot %d: %w", s.Frontend, i+1, markFull(err))
		}
	}
	v0 := LB4Service{Count: uint16(len(s.Backends)), RevNatIndex: s.RevNATIndex,
		AffinityTimeout: s.AffinityTimeout, Flags: uint16(s.Flags)}
	if err := m.LB4Services.Put(&k0, &v0); err != nil {
		return fmt.Errorf("put service %s: %w", s.Frontend, markFull(err))
	}
	if s.Maglev == nil && s.Frontend.Scope == spec.ScopeExternal {
		if err := m.DeleteMaglev(s.RevNATIndex); err != nil {
			return err
		}
	}
	return m.deleteSlots(s.Frontend, len(s.Backends)+1, int(old.Count))
}

// deleteSlots removes slots from..to of f.
func (m *Maps) deleteSlots(f spec.Frontend, from, to int) error {
	for slot := from; slot <= to; slot++ {
		k := lbKey(f, uint16(slot))
		if err := m.LB4Services.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete service %s slot %d: %w", f, slot, err)
		}
	}
	return nil
}

// DeleteService removes the frontend, its service entry first so that no
// new connection picks a slot being removed; a missing one is no error.
func (m *Maps) DeleteService(f spec.Frontend) error {
	var old LB4Service
	k0 := lbKey(f, 0)
	if err := m.LB4Services.Lookup(&k0, &old); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		return fmt.Errorf("lookup service %s: %w", f, err)
	}
	if err := m.LB4Services.Delete(&k0); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete service %s: %w", f, err)
	}
	if f.Scope == spec.ScopeExternal {
		if err := m.DeleteMaglev(old.RevNatIndex); err != nil {
			return err
		}
	}
	return m.deleteSlots(f, 1, int(old.Count))
}

// Services lists the services map, frontends in address, port, protocol
// and scope order. Slots past a service's count (left by an interrupted
// write) are not listed; a prune rewrites the service and removes them.
func (m *Maps) Services() ([]spec.Service, error) {
	byFrontend := map[spec.Frontend]*spec.Service{}
	slots := map[spec.Frontend]map[uint16]spec.BackendID{}
	var k LB4Key
	var v LB4Service
	it := m.LB4Services.Iterate()
	for it.Next(&k, &v) {
		f := spec.Frontend{Address: addrOfBE32(k.Address), Port: htons(k.Dport), Protocol: k.Proto, Scope: spec.LBScope(k.Scope)}
		if k.BackendSlot != 0 {
			if slots[f] == nil {
				slots[f] = map[uint16]spec.BackendID{}
			}
			slots[f][k.BackendSlot] = spec.BackendID(v.BackendId)
			continue
		}
		byFrontend[f] = &spec.Service{Frontend: f, RevNATIndex: v.RevNatIndex, Flags: spec.LBFlags(v.Flags),
			AffinityTimeout: v.AffinityTimeout, Backends: make([]spec.BackendID, v.Count)}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate services: %w", err)
	}
	out := make([]spec.Service, 0, len(byFrontend))
	for f, s := range byFrontend {
		for i := range s.Backends {
			s.Backends[i] = slots[f][uint16(i+1)]
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b spec.Service) int { return compareFrontends(a.Frontend, b.Frontend) })
	return out, nil
}

// ServiceBackends reads one frontend's backends from the maps, in slot
// order, as a packet to it would find them; a frontend not in the maps
// has none.
func (m *Maps) ServiceBackends(f spec.Frontend) ([]spec.Backend, error) {
	var v0 LB4Service
	k := lbKey(f, 0)
	if err := m.LB4Services.Lookup(&k, &v0); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("lookup service %s: %w", f, err)
	}
	out := make([]spec.Backend, 0, v0.Count)
	for slot := uint16(1); slot <= v0.Count; slot++ {
		var v LB4Service
		k := lbKey(f, slot)
		if err := m.LB4Services.Lookup(&k, &v); err != nil {
			return nil, fmt.Errorf("lookup service %s slot %d: %w", f, slot, err)
		}
		var be LB4Backend
		if err := m.LB4Backends.Lookup(&v.BackendId, &be); err != nil {
			return nil, fmt.Errorf("lookup backend %d of %s: %w", v.BackendId, f, err)
		}
		out = append(out, backendOf(spec.BackendID(v.BackendId), be))
	}
	return out, nil
}

func compareFrontends(a, b spec.Frontend) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	if a.Protocol != b.Protocol {
		return int(a.Protocol) - int(b.Protocol)
	}
	return int(a.Scope) - int(b.Scope)
}

// UpsertRevNAT writes what replies of index's connections are translated back to.
func (m *Maps) UpsertRevNAT(r spec.RevNAT) error {
	if r.Index == 0 || !r.Address.Is4() {
		return fmt.Errorf("reverse NAT %d (%s): want a non-zero index and an IPv4 address", r.Index, r.Address)
	}
	v := LB4ReverseNAT{Address: be32(r.Address), Port: htons(r.Port)}
	if err := m.LB4ReverseNAT.Put(&r.Index, &v); err != nil {
		return fmt.Errorf("put reverse NAT %d: %w", r.Index, markFull(err))
	}
	return nil
}

// DeleteRevNAT removes one index; a missing one is no error.
func (m *Maps) DeleteRevNAT(index uint16) error {
	if err := m.LB4ReverseNAT.Delete(&index); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete reverse NAT %d: %w", index, err)
	}
	return nil
}

// RevNATs lists the reverse NAT map.
func (m *Maps) RevNATs() (map[uint16]spec.RevNAT, error) {
	out := map[uint16]spec.RevNAT{}
	var k uint16
	var v LB4ReverseNAT
	it := m.LB4ReverseNAT.Iterate()
	for it.Next(&k, &v) {
		out[k] = spec.RevNAT{Index: k, Address: addrOfBE32(v.Address), Port: htons(v.Port)}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate reverse NAT: %w", err)
	}
	return out, nil
}

// sourceRangeStatic is the part of a source range key always matched:
// the reverse NAT index and its padding.
const sourceRangeStatic = 32

func sourceRangeKey(r spec.SourceRange) LB4SourceRangeKey {
	return LB4SourceRangeKey{Prefixlen: uint32(sourceRangeStatic + r.Prefix.Bits()), RevNatIndex: r.RevNATIndex,
		Address: be32(r.Prefix.Addr())}
}

// UpsertSourceRange admits the clients of r.Prefix to the frontend of
// r.RevNATIndex (with spec.LBSourceRange).
func (m *Maps) UpsertSourceRange(r spec.SourceRange) error {
	if err := r.Validate(); err != nil {
		return err
	}
	k := sourceRangeKey(r)
	if err := m.LB4SourceRange.Put(&k, uint8(1)); err != nil {
		return fmt.Errorf("put source range %s: %w", r, markFull(err))
	}
	return nil
}

// DeleteSourceRange removes one source range; a missing one is no error.
func (m *Maps) DeleteSourceRange(r spec.SourceRange) error {
	k := sourceRangeKey(r)
	if err := m.LB4SourceRange.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete source range %s: %w", r, err)
	}
	return nil
}

// SourceRanges lists the source range map, by reverse NAT index and prefix.
func (m *Maps) SourceRanges() ([]spec.SourceRange, error) {
	var out []spec.SourceRange
	var k LB4SourceRangeKey
	var v uint8
	it := m.LB4SourceRange.Iterate()
	for it.Next(&k, &v) {
		bits := int(k.Prefixlen) - sourceRangeStatic
		p, err := addrOfBE32(k.Address).Prefix(max(0, min(bits, 32)))
		if err != nil {
			return nil, fmt.Errorf("source range of %d: %w", k.RevNatIndex, err)
		}
		out = append(out, spec.SourceRange{RevNATIndex: k.RevNatIndex, Prefix: p})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate source ranges: %w", err)
	}
	slices.SortFunc(out, compareSourceRanges)
	return out, nil
}

func compareSourceRanges(a, b spec.SourceRange) int {
	if a.RevNATIndex != b.RevNATIndex {
		return int(a.RevNATIndex) - int(b.RevNATIndex)
	}
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	return a.Prefix.Bits() - b.Prefix.Bits()
}
