// Package policytest is a policy map in memory, for tests that have no
// kernel.
package policytest

import (
	"maps"
	"slices"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Map holds each endpoint's policy entries (a policy.Map).
type Map struct {
	mu      sync.Mutex
	entries map[uint16][]spec.PolicyEntry
}

// New returns an empty map.
func New() *Map { return &Map{entries: map[uint16][]spec.PolicyEntry{}} }

// Policy is what the map holds for an endpoint.
func (m *Map) Policy(id uint16) []spec.PolicyEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries[id])
}

// SetPolicy implements policy.Map. It checks entries as the datapath does.
func (m *Map) SetPolicy(id uint16, entries []spec.PolicyEntry) error {
	for _, e := range entries {
		if err := e.Validate(); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(entries) == 0 {
		delete(m.entries, id)
	} else {
		m.entries[id] = slices.Clone(entries)
	}
	return nil
}

// PolicyEndpoints implements policy.Map.
func (m *Map) PolicyEndpoints() ([]uint16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.entries)), nil
}
