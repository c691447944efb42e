// Package ipcachetest is an ipcache map in memory, for tests that have no
// kernel.
package ipcachetest

import (
	"errors"
	"maps"
	"net/netip"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// ErrInjected is what a write returns while Fail holds.
var ErrInjected = errors.New("injected map failure")

// Map is an ipcache map in memory (an ipcache.Map).
type Map struct {
	mu       sync.Mutex
	entries  map[netip.Prefix]spec.IPCacheEntry
	failures int
	upserts  map[netip.Prefix]int
	lists    int
}

// New returns an empty map holding entries.
func New(entries map[netip.Prefix]spec.IPCacheEntry) *Map {
	m := &Map{entries: maps.Clone(entries), upserts: map[netip.Prefix]int{}}
	if m.entries == nil {
		m.entries = map[netip.Prefix]spec.IPCacheEntry{}
	}
	return m
}

// Fail makes the next n upserts fail with ErrInjected.
func (m *Map) Fail(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures = n
}

// Put writes an entry behind the reconciler's back, as a stray one left
// by an earlier agent.
func (m *Map) Put(p netip.Prefix, e spec.IPCacheEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[p] = e
}

// Remove deletes an entry behind the reconciler's back.
func (m *Map) Remove(p netip.Prefix) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, p)
}

// Entries is a copy of what the map holds.
func (m *Map) Entries() map[netip.Prefix]spec.IPCacheEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.entries)
}

// Upserts counts the writes of p, failed ones included.
func (m *Map) Upserts(p netip.Prefix) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.upserts[p]
}

// Lists counts how often the map was listed: once a prune.
func (m *Map) Lists() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists
}

func (m *Map) UpsertIPCache(p netip.Prefix, e spec.IPCacheEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.upserts[p]++
	if m.failures > 0 {
		m.failures--
		return ErrInjected
	}
	m.entries[p] = e
	return nil
}

func (m *Map) DeleteIPCache(p netip.Prefix) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, p)
	return nil
}

func (m *Map) IPCacheEntries() (map[netip.Prefix]spec.IPCacheEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists++
	return maps.Clone(m.entries), nil
}
