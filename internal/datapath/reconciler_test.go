package datapath

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeTarget is a table that fails its first failUpdates updates.
type fakeTarget struct {
	mu          sync.Mutex
	rows        map[string]int
	failUpdates int
	order       []string
}

func (f *fakeTarget) List() (map[string]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.rows {
		out[k] = v
	}
	return out, nil
}

func (f *fakeTarget) Update(k string, v int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUpdates > 0 {
		f.failUpdates--
		return errors.New("table full")
	}
	f.rows[k] = v
	f.order = append(f.order, k)
	return nil
}

func (f *fakeTarget) Delete(k string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rows, k)
	return nil
}

func (f *fakeTarget) snapshot() map[string]int {
	m, _ := f.List()
	return m
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not timing the test
	}
}

func TestReconcilerConvergesPrunesAndRetries(t *testing.T) {
	target := &fakeTarget{rows: map[string]int{"stale": 1, "keep": 2}, failUpdates: 2}
	r := NewReconciler[string, int]("fake", target, discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx, time.Millisecond, 0)

	r.Replace(map[string]int{"keep": 2, "a": 1, "b": 2})
	waitFor(t, "convergence after failures", func() bool { return r.Health() == nil && len(target.snapshot()) == 3 })
	if got := target.snapshot(); got["a"] != 1 || got["b"] != 2 || got["keep"] != 2 || got["stale"] != 0 {
		t.Fatalf("table %v", got)
	}
	r.Remove("a")
	r.Set("c", 3)
	waitFor(t, "incremental change", func() bool {
		got := target.snapshot()
		return got["c"] == 3 && got["a"] == 0 && r.Health() == nil
	})
}

func TestReconcilerOrder(t *testing.T) {
	target := &fakeTarget{rows: map[string]int{}}
	r := NewReconciler[string, int]("fake", target, discard).
		WithOrder(func(_, _ string, a, b int) int { return b - a })
	r.Replace(map[string]int{"low": 1, "high": 9, "mid": 5})
	if err := r.Reconcile(); err != nil {
		t.Fatal(err)
	}
	if got := target.order; len(got) != 3 || got[0] != "high" || got[2] != "low" {
		t.Fatalf("update order %v", got)
	}
	if err := r.Reconcile(); err != nil || len(target.order) != 3 {
		t.Fatalf("second pass updated again: %v, %v", target.order, err)
	}
}

func TestPrivilegedReconcilerOnMaps(t *testing.T) {
	requireRoot(t)
	m, err := OpenMaps("")
	must(t, err)
	t.Cleanup(func() { m.Close() })
	must(t, m.UpsertIPCache(netip.MustParsePrefix("10.9.0.0/16"), IPCacheEntry{Identity: 7}))
	ipc := NewReconciler("ipcache", m.IPCacheTarget(), discard)
	want := map[netip.Prefix]IPCacheEntry{
		netip.MustParsePrefix("10.1.0.0/24"): {Identity: 300, TunnelEndpoint: netip.MustParseAddr("192.168.0.2")},
		netip.MustParsePrefix("0.0.0.0/0"):   {Identity: IdentityWorld},
	}
	ipc.Replace(want)
	must(t, ipc.Reconcile())
	got, err := m.IPCacheEntries()
	must(t, err)
	if len(got) != 2 || got[netip.MustParsePrefix("10.1.0.0/24")] != want[netip.MustParsePrefix("10.1.0.0/24")] {
		t.Fatalf("ipcache %v", got)
	}

	pol := NewReconciler("policy", m.PolicyTarget(), discard).WithOrder(PolicyDenyFirst)
	state, err := PolicyMapState(3, []PolicyEntry{egress(1000, tcpProto, 1, 1000), denyRule(egress(IdentityAny, 0, 0, 0))})
	must(t, err)
	pol.Replace(state)
	must(t, pol.Reconcile())
	cur, err := m.PolicyState(3)
	must(t, err)
	if len(cur) != len(state) {
		t.Fatalf("%d policy entries, want %d", len(cur), len(state))
	}
}
