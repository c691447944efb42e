// Package lbtest is the service maps and a TCP network in memory, for
// tests that have no kernel or must not listen on the machine.
package lbtest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Map holds services, backends and reverse translations (a
// loadbalancer.Map), checking them as the datapath does, and as full as
// the datapath's maps get: the services map holds an entry per frontend
// and scope and one per slot.
type Map struct {
	mu       sync.Mutex
	max      int
	entries  int // the services map's
	full     int
	services map[spec.Frontend]spec.Service
	backends map[spec.BackendID]spec.Backend
	revNATs  map[uint16]spec.RevNAT
	ranges   map[spec.SourceRange]bool
	maglev   map[uint16][]spec.BackendID
}

// MaglevTableSize is the fake's Maglev table size, small to keep tests
// fast.
const MaglevTableSize = 251

// ErrFull is the error of a write that a full map has no room for.
var ErrFull = errors.New("map full")

// New returns empty maps of the datapath's compiled size, 65536 entries.
func New() *Map { return NewWithMax(65536) }

// NewWithMax returns empty maps of max entries each (--bpf-lb-map-max).
func NewWithMax(max int) *Map {
	return &Map{max: max, services: map[spec.Frontend]spec.Service{}, backends: map[spec.BackendID]spec.Backend{},
		revNATs: map[uint16]spec.RevNAT{}, ranges: map[spec.SourceRange]bool{}, maglev: map[uint16][]spec.BackendID{}}
}

// Full counts the writes refused for want of room: a control plane that
// keeps within the maps never sees one.
func (m *Map) Full() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.full
}

// SourceRangeEntries counts the entries of the source range map.
func (m *Map) SourceRangeEntries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ranges)
}

// Entries counts the entries of the services, backends and reverse NAT maps.
func (m *Map) Entries() (services, backends, revNATs int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries, len(m.backends), len(m.revNATs)
}

// UpsertService implements loadbalancer.Map. The datapath writes a
// growing service's slots before its count, so it needs room for the
// larger of the old and the new service.
func (m *Map) UpsertService(s spec.Service) error {
	if err := s.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := 0
	if o, ok := m.services[s.Frontend]; ok {
		old = 1 + len(o.Backends)
	}
	if grow := 1 + len(s.Backends) - old; grow > 0 && m.entries+grow > m.max {
		m.full++
		return fmt.Errorf("put service %s: %w", s.Frontend, ErrFull)
	}
	if s.Maglev != nil && len(s.Maglev) != MaglevTableSize {
		return fmt.Errorf("service %s: a Maglev table of %d slots, want %d", s.Frontend, len(s.Maglev), MaglevTableSize)
	}
	m.entries += 1 + len(s.Backends) - old
	s.Backends = slices.Clone(s.Backends)
	switch {
	case s.Maglev != nil:
		m.maglev[s.RevNATIndex] = slices.Clone(s.Maglev)
	case s.Frontend.Scope == spec.ScopeExternal:
		delete(m.maglev, s.RevNATIndex)
	}
	s.Maglev = nil
	m.services[s.Frontend] = s
	return nil
}

// MaglevTableSize implements loadbalancer.Map.
func (m *Map) MaglevTableSize() int { return MaglevTableSize }

// MaglevTable is the Maglev table of the frontend with reverse NAT
// index idx, as datapath.Maps reads it.
func (m *Map) MaglevTable(idx uint16) ([]spec.BackendID, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.maglev[idx]
	return slices.Clone(t), ok, nil
}

// MaglevIndexes implements loadbalancer.Map.
func (m *Map) MaglevIndexes() ([]uint16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.maglev)), nil
}

// DeleteMaglev implements loadbalancer.Map.
func (m *Map) DeleteMaglev(idx uint16) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.maglev, idx)
	return nil
}

// DeleteService implements loadbalancer.Map.
func (m *Map) DeleteService(f spec.Frontend) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.services[f]; ok {
		m.entries -= 1 + len(o.Backends)
		delete(m.services, f)
		if f.Scope == spec.ScopeExternal {
			delete(m.maglev, o.RevNATIndex)
		}
	}
	return nil
}

// Services implements loadbalancer.Map.
func (m *Map) Services() ([]spec.Service, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.services))
	for i := range out {
		out[i].Backends = slices.Clone(out[i].Backends)
	}
	return out, nil
}

// UpsertBackend implements loadbalancer.Map.
func (m *Map) UpsertBackend(b spec.Backend) error {
	if err := b.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.backends[b.ID]; !ok && len(m.backends) >= m.max {
		m.full++
		return fmt.Errorf("put backend %d: %w", b.ID, ErrFull)
	}
	m.backends[b.ID] = b
	return nil
}

// DeleteBackend implements loadbalancer.Map.
func (m *Map) DeleteBackend(id spec.BackendID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.backends, id)
	return nil
}

// Backends implements loadbalancer.Map.
func (m *Map) Backends() (map[spec.BackendID]spec.Backend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.backends), nil
}

// UpsertRevNAT implements loadbalancer.Map.
func (m *Map) UpsertRevNAT(r spec.RevNAT) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.revNATs[r.Index]; !ok && len(m.revNATs) >= m.max {
		m.full++
		return fmt.Errorf("put reverse NAT %d: %w", r.Index, ErrFull)
	}
	m.revNATs[r.Index] = r
	return nil
}

// DeleteRevNAT implements loadbalancer.Map.
func (m *Map) DeleteRevNAT(index uint16) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.revNATs, index)
	return nil
}

// RevNATs implements loadbalancer.Map.
func (m *Map) RevNATs() (map[uint16]spec.RevNAT, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.revNATs), nil
}

// UpsertSourceRange implements loadbalancer.Map.
func (m *Map) UpsertSourceRange(r spec.SourceRange) error {
	if err := r.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ranges[r] && len(m.ranges) >= m.max {
		m.full++
		return fmt.Errorf("put source range %s: %w", r, ErrFull)
	}
	m.ranges[r] = true
	return nil
}

// DeleteSourceRange implements loadbalancer.Map.
func (m *Map) DeleteSourceRange(r spec.SourceRange) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ranges, r)
	return nil
}

// SourceRanges implements loadbalancer.Map.
func (m *Map) SourceRanges() ([]spec.SourceRange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.ranges)), nil
}
