package ipcache

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
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
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipcache/ipcachetest"
)

// recHarness is a hive with the table, its writer and its reconciler
// against a map, the way the agent wires them.
type recHarness struct {
	db     *statedb.DB
	tbl    statedb.Table[*EntryRow]
	w      *Writer
	rec    reconciler.Reconciler[*EntryRow]
	health *health.Registry
}

// replace makes the table hold exactly want.
func (h *recHarness) replace(want map[netip.Prefix]spec.IPCacheEntry) (changed, deleted int, err error) {
	return replace(h.w, h.db, h.tbl, want)
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
			cell.Invoke(func(p reconciler.Params, tbl statedb.RWTable[*EntryRow], reg *health.Registry) error {
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

// statusIs is nil when p's reconciliation status in the table is want.
func (h *recHarness) statusIs(p netip.Prefix, want reconciler.StatusKind) error {
	if got := h.status(p); got != want {
		return fmt.Errorf("status of %s %s, want %s", p, got, want)
	}
	return nil
}

// healthIs is nil when the reconciler's health is at level with an error
// that contains errPart ("" for any error, none included).
func (h *recHarness) healthIs(level cell.Level, errPart string) error {
	s, ok := h.reconcilerHealth()
	if !ok {
		return errors.New("no reconciler health yet")
	}
	if s.Level != level || !strings.Contains(s.Error, errPart) {
		return fmt.Errorf("reconciler health %s (error %q), want %s with an error containing %q", s.Level, s.Error, level, errPart)
	}
	return nil
}

// sameEntries is nil when got holds exactly the entries of want, and
// otherwise names the first few differences.
func sameEntries(got, want map[netip.Prefix]spec.IPCacheEntry) error {
	var diffs []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s missing", p))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%s is %+v, want %+v", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s is %+v, want none", p, g))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	slices.Sort(diffs)
	const shown = 5
	if len(diffs) > shown {
		diffs = append(diffs[:shown], fmt.Sprintf("%d more", len(diffs)-shown))
	}
	return fmt.Errorf("map of %d entries, want %d: %s", len(got), len(want), strings.Join(diffs, "; "))
}

func TestReconcilerRetriesFailedUpdate(t *testing.T) {
	m := ipcachetest.New(nil)
	h := startReconciler(t, func() Map { return m })
	// The first sync initializes the table and the reconciler prunes
	// once; after that only the incremental update and its retry write.
	if _, _, err := h.replace(nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if m.Lists() == 0 {
			return errors.New("the reconciler has not pruned (listed the map) yet")
		}
		return nil
	})
	m.Fail(1)
	p := pfx("10.0.1.5/32")
	want := spec.IPCacheEntry{Identity: 300}
	if _, _, err := h.replace(map[netip.Prefix]spec.IPCacheEntry{p: want}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		var inMap error
		if got := m.Entries()[p]; got != want {
			inMap = fmt.Errorf("map entry of %s %+v, want %+v", p, got, want)
		}
		return errors.Join(inMap, h.statusIs(p, reconciler.StatusKindDone))
	})
	if n := m.Upserts(p); n != 2 {
		t.Errorf("%d upserts, want one failure and one retry", n)
	}
	testenv.Eventually(t, 10*time.Second, func() error { return h.healthIs(cell.StatusOK, "") })

	// A failing map shows in the module health until the retry succeeds.
	m.Fail(1 << 30)
	if _, _, err := h.replace(map[netip.Prefix]spec.IPCacheEntry{p: {Identity: 301}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		return h.healthIs(cell.StatusDegraded, ipcachetest.ErrInjected.Error())
	})
	if got := h.status(p); got != reconciler.StatusKindError {
		t.Errorf("status %s, want Error", got)
	}
	m.Fail(0)
	testenv.Eventually(t, 10*time.Second, func() error { // the retry succeeds
		var inMap error
		if got := m.Entries()[p]; got.Identity != 301 {
			inMap = fmt.Errorf("map entry of %s %+v, want identity 301", p, got)
		}
		return errors.Join(inMap, h.statusIs(p, reconciler.StatusKindDone), h.healthIs(cell.StatusOK, ""))
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
	if _, _, err := h.replace(desired); err != nil {
		t.Fatal(err)
	}
	// Equal to desired: the stray pruned.
	testenv.Eventually(t, 10*time.Second, func() error { return sameEntries(m.Entries(), desired) })

	// Deleted from the table: deleted from the map.
	delete(desired, b)
	if _, _, err := h.replace(desired); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error { return sameEntries(m.Entries(), desired) })

	// Changed behind the agent's back: the next prune repairs it.
	m.Remove(a)
	m.Put(stray, spec.IPCacheEntry{Identity: 999})
	h.rec.Prune()
	testenv.Eventually(t, 10*time.Second, func() error { return sameEntries(m.Entries(), desired) })
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
	if _, _, err := h.replace(map[netip.Prefix]spec.IPCacheEntry{p: {Identity: 300}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error { // an error status while there is no map
		var noMap error
		if s, ok := h.reconcilerHealth(); !ok || !strings.Contains(s.Error, errNoMap.Error()) {
			noMap = fmt.Errorf("reconciler health %+v (found %v), want an error containing %q", s, ok, errNoMap.Error())
		}
		return errors.Join(h.statusIs(p, reconciler.StatusKindError), noMap)
	})
	m := ipcachetest.New(nil)
	mu.Lock()
	current = m
	mu.Unlock()
	testenv.Eventually(t, 10*time.Second, func() error { // the entry once the map exists
		var inMap error
		if got := m.Entries()[p]; got.Identity != 300 {
			inMap = fmt.Errorf("map entry of %s %+v, want identity 300", p, got)
		}
		return errors.Join(h.statusIs(p, reconciler.StatusKindDone), inMap)
	})
}
