// Package policytest is a policy map in memory, for tests that have no
// kernel.
package policytest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Map holds each policy group's entries (a policyagent.Map).
type Map struct {
	mu      sync.Mutex
	groups  map[spec.PolicyGroup][]spec.PolicyEntry
	flushed map[uint16]int
	limit   int
}

// New returns an empty map.
func New() *Map {
	return &Map{groups: map[spec.PolicyGroup][]spec.PolicyEntry{}, flushed: map[uint16]int{}}
}

// Policy is what the map holds for an endpoint, in a stable order.
func (m *Map) Policy(id uint16) []spec.PolicyEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []spec.PolicyEntry
	for g, entries := range m.groups {
		if g.EndpointID == id {
			out = append(out, entries...)
		}
	}
	slices.SortFunc(out, func(a, b spec.PolicyEntry) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Endpoints lists the endpoints with entries.
func (m *Map) Endpoints() []uint16 {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[uint16]bool{}
	for g := range m.groups {
		seen[g.EndpointID] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Flushed counts the flushes of an endpoint's connections.
func (m *Map) Flushed(id uint16) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushed[id]
}

// UpdatePolicy implements policyagent.Map. It checks entries as the
// datapath does; narrowed is true when an entry went. With a limit, a
// policy of more entries than it is refused whole, as the datapath's
// maps refuse one that does not fit.
func (m *Map) UpdatePolicy(ep uint16, groups map[spec.PolicyGroup][]spec.PolicyEntry) (bool, error) {
	for g, entries := range groups {
		if g.EndpointID != ep {
			return false, fmt.Errorf("group %+v is not of endpoint %d", g, ep)
		}
		for _, e := range entries {
			if err := e.Validate(); err != nil {
				return false, err
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limit > 0 {
		n := 0
		for g, entries := range m.groups {
			if _, ok := groups[g]; !ok && g.EndpointID == ep {
				n += len(entries)
			}
		}
		for _, entries := range groups {
			n += len(entries)
		}
		if n > m.limit {
			return false, fmt.Errorf("endpoint %d: %d entries, more than %d", ep, n, m.limit)
		}
	}
	narrowed := false
	for g, entries := range groups {
		narrowed = m.setLocked(g, entries) || narrowed
	}
	return narrowed, nil
}

// Limit refuses policies of more than n entries an endpoint from now on.
func (m *Map) Limit(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limit = n
}

func (m *Map) setLocked(g spec.PolicyGroup, entries []spec.PolicyEntry) (narrowed bool) {
	for _, old := range m.groups[g] {
		narrowed = narrowed || !slices.Contains(entries, old)
	}
	if len(entries) == 0 {
		delete(m.groups, g)
	} else {
		m.groups[g] = slices.Clone(entries)
	}
	return narrowed
}

// SyncPolicy implements policyagent.Map.
func (m *Map) SyncPolicy(groups map[spec.PolicyGroup][]spec.PolicyEntry) ([]uint16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	narrowed := map[uint16]bool{}
	for g := range m.groups {
		if _, ok := groups[g]; !ok && m.setLocked(g, nil) {
			narrowed[g.EndpointID] = true
		}
	}
	for g, entries := range groups {
		if m.setLocked(g, entries) {
			narrowed[g.EndpointID] = true
		}
	}
	return slices.Sorted(maps.Keys(narrowed)), nil
}

// FlushDisallowed implements policyagent.Map: it counts.
func (m *Map) FlushDisallowed(ids ...uint16) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.flushed[id]++
	}
	return nil
}
