// Package ipcache holds the agent's desired ipcache (prefix -> identity
// and tunnel endpoint) in a statedb table, and registers the statedb
// reconciler that makes the datapath's ipcache map match it.
package ipcache

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath"
)

// TableName is the table's name in statedb (and in its script commands).
const TableName = "ipcache"

// Entry is one desired ipcache entry. Entries in the table are never
// changed in place: a writer inserts a changed copy.
type Entry struct {
	Prefix         netip.Prefix
	Identity       uint32
	TunnelEndpoint netip.Addr // invalid when not behind a tunnel
	Status         reconciler.Status
}

// Value is what the datapath map holds for the entry.
func (e *Entry) Value() datapath.IPCacheEntry {
	return datapath.IPCacheEntry{Identity: e.Identity, TunnelEndpoint: e.TunnelEndpoint}
}

// TableHeader implements statedb.TableWritable.
func (*Entry) TableHeader() []string {
	return []string{"Prefix", "Identity", "TunnelEndpoint", "Status"}
}

// TableRow implements statedb.TableWritable.
func (e *Entry) TableRow() []string {
	tunnel := ""
	if e.TunnelEndpoint.IsValid() {
		tunnel = e.TunnelEndpoint.String()
	}
	return []string{e.Prefix.String(), strconv.FormatUint(uint64(e.Identity), 10), tunnel, e.Status.String()}
}

func (e *Entry) clone() *Entry {
	c := *e
	return &c
}

func (e *Entry) getStatus() reconciler.Status { return e.Status }

func (e *Entry) setStatus(s reconciler.Status) *Entry {
	e.Status = s
	return e
}

// PrefixIndex is the primary index: one entry per (masked) prefix.
var PrefixIndex = statedb.Index[*Entry, netip.Prefix]{
	Name: "prefix",
	FromObject: func(e *Entry) index.KeySet {
		return index.NewKeySet(index.NetIPPrefix(e.Prefix))
	},
	FromKey:    index.NetIPPrefix,
	FromString: index.NetIPPrefixString,
	Unique:     true,
}

// NewTable creates the table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*Entry], error) {
	return statedb.NewTable(db, TableName, PrefixIndex)
}

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
func (w *Writer) Replace(desired map[netip.Prefix]datapath.IPCacheEntry) (changed, deleted int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := make(map[netip.Prefix]datapath.IPCacheEntry, len(desired))
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
