package ipcache

import (
	"net/netip"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
)

// Writer writes the entries of the desired ipcache that changed into the
// table. It is the table's only writer.
type Writer struct {
	w *desired.Writer[netip.Prefix, *EntryRow]
}

// NewWriter registers the writer as the table's initializer. Call it
// before the reconciler starts.
func NewWriter(db *statedb.DB, tbl statedb.RWTable[*EntryRow]) *Writer {
	return &Writer{w: desired.NewWriter(db, tbl, PrefixIndex,
		func(e *EntryRow) netip.Prefix { return e.Prefix },
		func(a, b *EntryRow) bool { return a.Value() == b.Value() })}
}

// Update writes the entries of upsert and deletes those of gone, leaving
// the others as they are, in one transaction. Entries whose value did not
// change are not rewritten, so the reconciler does not touch them again.
// Its first call marks the table initialized, so it must hold every
// entry. It returns how many entries it inserted or changed and how many
// it deleted.
func (w *Writer) Update(upsert map[netip.Prefix]spec.IPCacheEntry, gone []netip.Prefix) (changed, deleted int, err error) {
	want := make(map[netip.Prefix]*EntryRow, len(upsert))
	for p, v := range upsert {
		p = p.Masked()
		want[p] = newEntry(p, v)
	}
	masked := make([]netip.Prefix, len(gone))
	for i, p := range gone {
		masked[i] = p.Masked()
	}
	return w.w.Update(want, masked)
}

// newEntry is the row of prefix p (masked) with value v.
func newEntry(p netip.Prefix, v spec.IPCacheEntry) *EntryRow {
	return &EntryRow{Prefix: p, Identity: v.Identity, TunnelEndpoint: v.TunnelEndpoint, CIDRIdentity: v.CIDRIdentity}
}
