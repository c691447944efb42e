package ipcache

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Writer replaces the table's contents with the desired ipcache. It is
// the table's only writer.
type Writer struct {
	db  *statedb.DB
	tbl statedb.RWTable[*Entry]

	mu sync.Mutex
	// initDone marks the table initialized after the first Replace, so
	// that the reconciler prunes nothing before the desired state is
	// known (entries pinned by a previous agent run keep traffic flowing
	// until then).
	initDone func(statedb.WriteTxn)
}

// NewWriter registers the writer as the table's initializer. Call it
// before the reconciler starts.
func NewWriter(db *statedb.DB, tbl statedb.RWTable[*Entry]) *Writer {
	txn := db.WriteTxn(tbl)
	done := tbl.RegisterInitializer(txn, "ipcache-writer")
	txn.Commit()
	return &Writer{db: db, tbl: tbl, initDone: done}
}

// Replace makes the table hold exactly desired, in one transaction.
// Entries whose value did not change are not rewritten, so the reconciler
// does not touch them again. It returns how many entries it inserted or
// changed and how many it deleted.
func (w *Writer) Replace(desired map[netip.Prefix]spec.IPCacheEntry) (changed, deleted int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := make(map[netip.Prefix]spec.IPCacheEntry, len(desired))
	for p, v := range desired {
		want[p.Masked()] = v
	}
	txn := w.db.WriteTxn(w.tbl)
	defer txn.Abort() // a no-op after Commit
	var stale []*Entry
	for e := range w.tbl.All(txn) {
		if _, ok := want[e.Prefix]; !ok {
			stale = append(stale, e)
		}
	}
	for _, e := range stale {
		if _, _, err := w.tbl.Delete(txn, e); err != nil {
			return 0, 0, fmt.Errorf("delete %s: %w", e.Prefix, err)
		}
		deleted++
	}
	for p, v := range want {
		if cur, _, ok := w.tbl.Get(txn, PrefixIndex.Query(p)); ok && cur.Value() == v {
			continue
		}
		e := &Entry{Prefix: p, Identity: v.Identity, TunnelEndpoint: v.TunnelEndpoint, Status: reconciler.StatusPending()}
		if _, _, err := w.tbl.Insert(txn, e); err != nil {
			return 0, 0, fmt.Errorf("insert %s: %w", p, err)
		}
		changed++
	}
	if w.initDone != nil {
		w.initDone(txn)
		w.initDone = nil
	}
	txn.Commit()
	return changed, deleted, nil
}
