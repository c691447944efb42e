package ipcache

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func newTestTable(t *testing.T) (*statedb.DB, statedb.RWTable[*EntryRow]) {
	t.Helper()
	db := statedb.New()
	tbl, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Stop() })
	return db, tbl
}

// replace makes the table hold exactly want through w.Update, deleting
// what want lacks: what a round writes when every prefix is dirty.
func replace(w *Writer, db *statedb.DB, tbl statedb.Table[*EntryRow], want map[netip.Prefix]spec.IPCacheEntry) (changed, deleted int, err error) {
	keep := map[netip.Prefix]bool{}
	for p := range want {
		keep[p.Masked()] = true
	}
	var gone []netip.Prefix
	for e := range tbl.All(db.ReadTxn()) {
		if !keep[e.Prefix] {
			gone = append(gone, e.Prefix)
		}
	}
	return w.Update(want, gone)
}

// revisions are the table's entries by prefix, with the revision each was
// last written at.
func revisions(db *statedb.DB, tbl statedb.Table[*EntryRow]) map[netip.Prefix]statedb.Revision {
	out := map[netip.Prefix]statedb.Revision{}
	for e, rev := range tbl.All(db.ReadTxn()) {
		out[e.Prefix] = rev
	}
	return out
}

func TestWriterUpdate(t *testing.T) {
	db, tbl := newTestTable(t)
	w := NewWriter(db, tbl)
	if ok, _ := tbl.Initialized(db.ReadTxn()); ok {
		t.Fatal("initialized before the first Update: the reconciler would prune the map empty")
	}
	a, b, c := pfx("10.0.1.5/32"), pfx("10.0.2.7/32"), pfx("192.168.0.3/32")
	tunnel := addr("192.168.0.3")

	steps := []struct {
		name                 string
		desired              map[netip.Prefix]spec.IPCacheEntry
		changed, deleted     int
		rewritten, untouched []netip.Prefix
	}{
		{
			name: "first sync writes everything",
			desired: map[netip.Prefix]spec.IPCacheEntry{
				a: {Identity: 300}, b: {Identity: 400, TunnelEndpoint: tunnel}, c: {Identity: 6},
			},
			changed: 3, rewritten: []netip.Prefix{a, b, c},
		},
		{
			name: "same desired state writes nothing",
			desired: map[netip.Prefix]spec.IPCacheEntry{
				a: {Identity: 300}, b: {Identity: 400, TunnelEndpoint: tunnel}, c: {Identity: 6},
			},
			untouched: []netip.Prefix{a, b, c},
		},
		{
			name: "one identity changes: only that entry is written",
			desired: map[netip.Prefix]spec.IPCacheEntry{
				a: {Identity: 301}, b: {Identity: 400, TunnelEndpoint: tunnel}, c: {Identity: 6},
			},
			changed: 1, rewritten: []netip.Prefix{a}, untouched: []netip.Prefix{b, c},
		},
		{
			name: "a tunnel endpoint change is a change",
			desired: map[netip.Prefix]spec.IPCacheEntry{
				a: {Identity: 301}, b: {Identity: 400, TunnelEndpoint: addr("192.168.0.4")}, c: {Identity: 6},
			},
			changed: 1, rewritten: []netip.Prefix{b}, untouched: []netip.Prefix{a, c},
		},
		{
			name: "an entry no longer desired is deleted, the rest untouched",
			desired: map[netip.Prefix]spec.IPCacheEntry{
				a: {Identity: 301}, c: {Identity: 6},
			},
			deleted: 1, untouched: []netip.Prefix{a, c},
		},
		{
			name: "unmasked prefixes are stored masked",
			desired: map[netip.Prefix]spec.IPCacheEntry{
				a: {Identity: 301}, c: {Identity: 6}, pfx("10.9.1.2/16"): {Identity: 7},
			},
			changed: 1, rewritten: []netip.Prefix{pfx("10.9.0.0/16")}, untouched: []netip.Prefix{a, c},
		},
		{
			name:    "nothing desired deletes all",
			desired: map[netip.Prefix]spec.IPCacheEntry{},
			deleted: 3,
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := revisions(db, tbl)
			changed, deleted, err := replace(w, db, tbl, st.desired)
			if err != nil {
				t.Fatal(err)
			}
			if changed != st.changed || deleted != st.deleted {
				t.Errorf("changed %d deleted %d, want %d and %d", changed, deleted, st.changed, st.deleted)
			}
			after := revisions(db, tbl)
			for _, p := range st.rewritten {
				if r, ok := after[p]; !ok || r <= before[p] {
					t.Errorf("%s not rewritten: revision %d -> %d", p, before[p], r)
				}
			}
			for _, p := range st.untouched {
				if after[p] != before[p] {
					t.Errorf("%s rewritten: revision %d -> %d", p, before[p], after[p])
				}
			}
			got := map[netip.Prefix]spec.IPCacheEntry{}
			for e := range tbl.All(db.ReadTxn()) {
				got[e.Prefix] = e.Value()
				if after[e.Prefix] > before[e.Prefix] && e.Status.Kind != reconciler.StatusKindPending {
					t.Errorf("%s written with status %s, want Pending", e.Prefix, e.Status.Kind)
				}
			}
			want := map[netip.Prefix]spec.IPCacheEntry{}
			for p, v := range st.desired {
				want[p.Masked()] = v
			}
			if !maps.Equal(got, want) {
				t.Errorf("table\n got %v\nwant %v", got, want)
			}
			if ok, _ := tbl.Initialized(db.ReadTxn()); !ok {
				t.Error("not initialized after Update")
			}
		})
	}
}
