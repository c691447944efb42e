package ipcache

import (
	"context"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipcache/ipcachetest"
)

// recHarness is a hive with the table, its writer and its reconciler
// against a map, the way the agent wires them.
type recHarness struct {
	db     *statedb.DB
	tbl    statedb.Table[*Entry]
	w      *Writer
	rec    reconciler.Reconciler[*Entry]
	health *health.Registry
}

// startReconciler starts a hive with the table, its writer and its
// reconciler against the map getMap returns.
func startReconciler(t *testing.T, getMap func() Map) *recHarness {
	t.Helper()
	var h recHarness
	hv := health.NewHive(
		statedb.Cell, job.Cell, health.Cell, TableCell,
		cell.Module("ipcache", "test module",
			cell.ProvidePrivate(func(r job.Registry, h cell.Health) job.Group { return r.NewGroup(h) }),
			cell.Invoke(func(p reconciler.Params, tbl statedb.RWTable[*Entry], reg *health.Registry) error {
				h.db, h.tbl, h.health = p.DB, tbl, reg
				h.w = NewWriter(p.DB, tbl)
				var err error
				h.rec, err = RegisterReconciler(p, tbl, getMap)
				return err
			}),
		),
	)
	log := hivetest.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hv.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hv.Stop(log, ctx); err != nil {
			t.Error(err)
		}
	})
	return &h
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reconcilerHealth is the reconciler job's status in the module health.
func (h *recHarness) reconcilerHealth() (health.Status, bool) {
	for _, s := range h.health.All() {
		if strings.HasPrefix(s.Scope, "ipcache.") && strings.Contains(s.Scope, "reconcile") {
			return s, true
		}
	}
	return health.Status{}, false
}

func (h *recHarness) status(p netip.Prefix) reconciler.StatusKind {
	e, _, ok := h.tbl.Get(h.db.ReadTxn(), PrefixIndex.Query(p))
	if !ok {
		return reconciler.StatusKindUnset
	}
	return e.Status.Kind
}

func TestReconcilerRetriesFailedUpdate(t *testing.T) {
	m := ipcachetest.New(nil)
	h := startReconciler(t, func() Map { return m })
	// The first sync initializes the table and the reconciler prunes
	// once; after that only the incremental update and its retry write.
	if _, _, err := h.w.Replace(nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first prune", func() bool { return m.Lists() > 0 })
	m.Fail(1)
	p := pfx("10.0.1.5/32")
	want := spec.IPCacheEntry{Identity: 300}
	if _, _, err := h.w.Replace(map[netip.Prefix]spec.IPCacheEntry{p: want}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the entry in the map and Done", func() bool {
		return m.Entries()[p] == want && h.status(p) == reconciler.StatusKindDone
	})
	if n := m.Upserts(p); n != 2 {
		t.Errorf("%d upserts, want one failure and one retry", n)
	}
	eventually(t, "reconciler health OK", func() bool {
		s, ok := h.reconcilerHealth()
		return ok && s.Level == cell.StatusOK
	})

	// A failing map shows in the module health until the retry succeeds.
	m.Fail(1 << 30)
	if _, _, err := h.w.Replace(map[netip.Prefix]spec.IPCacheEntry{p: {Identity: 301}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reconciler health degraded", func() bool {
		s, ok := h.reconcilerHealth()
		return ok && s.Level == cell.StatusDegraded && strings.Contains(s.Error, ipcachetest.ErrInjected.Error())
	})
	if got := h.status(p); got != reconciler.StatusKindError {
		t.Errorf("status %s, want Error", got)
	}
	m.Fail(0)
	eventually(t, "the retry succeeds", func() bool {
		s, ok := h.reconcilerHealth()
		return m.Entries()[p].Identity == 301 &&
			h.status(p) == reconciler.StatusKindDone && ok && s.Level == cell.StatusOK
	})
}

func TestReconcilerDeletesAndPrunes(t *testing.T) {
	m := ipcachetest.New(nil)
	a, b, stray := pfx("10.0.1.5/32"), pfx("10.0.2.7/32"), pfx("10.9.9.9/32")
	// Left by a previous run: kept until the first sync, then pruned.
	m.Put(stray, spec.IPCacheEntry{Identity: 999})
	h := startReconciler(t, func() Map { return m })
	if _, ok := m.Entries()[stray]; !ok {
		t.Fatal("pruned before the first sync")
	}
	desired := map[netip.Prefix]spec.IPCacheEntry{a: {Identity: 300}, b: {Identity: 400}}
	if _, _, err := h.w.Replace(desired); err != nil {
		t.Fatal(err)
	}
	eventually(t, "map equal to desired, stray pruned", func() bool {
		return maps.Equal(m.Entries(), desired)
	})

	// Deleted from the table: deleted from the map.
	delete(desired, b)
	if _, _, err := h.w.Replace(desired); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b deleted", func() bool {
		return maps.Equal(m.Entries(), desired)
	})

	// Changed behind the agent's back: the next prune repairs it.
	m.Remove(a)
	m.Put(stray, spec.IPCacheEntry{Identity: 999})
	h.rec.Prune()
	eventually(t, "a restored and the stray pruned", func() bool {
		return maps.Equal(m.Entries(), desired)
	})
}

func TestReconcilerWaitsForMap(t *testing.T) {
	var mu sync.Mutex
	var current Map // nil until the datapath starts
	getMap := func() Map {
		mu.Lock()
		defer mu.Unlock()
		return current
	}
	h := startReconciler(t, getMap)
	p := pfx("10.0.1.5/32")
	if _, _, err := h.w.Replace(map[netip.Prefix]spec.IPCacheEntry{p: {Identity: 300}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an error status while there is no map", func() bool {
		s, ok := h.reconcilerHealth()
		return h.status(p) == reconciler.StatusKindError && ok && strings.Contains(s.Error, errNoMap.Error())
	})
	m := ipcachetest.New(nil)
	mu.Lock()
	current = m
	mu.Unlock()
	eventually(t, "the entry once the map exists", func() bool {
		return h.status(p) == reconciler.StatusKindDone &&
			m.Entries()[p].Identity == 300
	})
}
