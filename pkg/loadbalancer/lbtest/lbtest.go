// Package lbtest is the service maps and a TCP network in memory, for
// tests that have no kernel or must not listen on the machine.
package lbtest

import (
	"maps"
	"slices"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Map holds services, backends and reverse translations (a
// loadbalancer.Map), checking them as the datapath does.
type Map struct {
	mu       sync.Mutex
	services map[spec.Frontend]spec.Service
	backends map[spec.BackendID]spec.Backend
	revNATs  map[uint16]spec.RevNAT
}

// New returns empty maps.
func New() *Map {
	return &Map{services: map[spec.Frontend]spec.Service{}, backends: map[spec.BackendID]spec.Backend{},
		revNATs: map[uint16]spec.RevNAT{}}
}

// UpsertService implements loadbalancer.Map.
func (m *Map) UpsertService(s spec.Service) error {
	if err := s.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.Backends = slices.Clone(s.Backends)
	m.services[s.Frontend] = s
	return nil
}

// DeleteService implements loadbalancer.Map.
func (m *Map) DeleteService(f spec.Frontend) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.services, f)
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
