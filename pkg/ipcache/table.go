// Package ipcache computes the agent's desired ipcache (prefix ->
// identity and tunnel endpoint) and the routes to other nodes' pods from
// the local endpoints, the cluster's Nodes, CiliumNodes and
// CiliumEndpoints and the prefixes that policy rules name, following
// those tables' changes so that a change recomputes only the entries it
// touches; it holds them in statedb tables, and registers the statedb
// reconcilers that make the datapath's ipcache map and routes match them.
package ipcache

import (
	"net/netip"
	"strconv"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// TableName is the table's name in statedb (and in its script commands).
const TableName = "ipcache"

// EntryRow is one desired ipcache entry. Entries in the table are never
// changed in place: a writer inserts a changed copy.
type EntryRow struct {
	Prefix         netip.Prefix
	Identity       identity.NumericIdentity
	TunnelEndpoint netip.Addr // invalid when not behind a tunnel
	CIDRIdentity   identity.NumericIdentity
	Status         reconciler.Status
}

// Value is what the datapath map holds for the entry.
func (e *EntryRow) Value() spec.IPCacheEntry {
	return spec.IPCacheEntry{Identity: e.Identity, TunnelEndpoint: e.TunnelEndpoint, CIDRIdentity: e.CIDRIdentity}
}

// TableHeader implements statedb.TableWritable.
func (*EntryRow) TableHeader() []string {
	return []string{"Prefix", "Identity", "TunnelEndpoint", "Status"}
}

// TableRow implements statedb.TableWritable.
func (e *EntryRow) TableRow() []string {
	tunnel := ""
	if e.TunnelEndpoint.IsValid() {
		tunnel = e.TunnelEndpoint.String()
	}
	return []string{e.Prefix.String(), strconv.FormatUint(uint64(e.Identity), 10), tunnel, e.Status.String()}
}

// Clone implements desired.Row.
func (e *EntryRow) Clone() *EntryRow {
	c := *e
	return &c
}

// GetStatus implements desired.Row.
func (e *EntryRow) GetStatus() reconciler.Status { return e.Status }

// WithStatus implements desired.Row.
func (e *EntryRow) WithStatus(s reconciler.Status) *EntryRow {
	e.Status = s
	return e
}

// PrefixIndex is the primary index: one entry per (masked) prefix.
var PrefixIndex = statedb.Index[*EntryRow, netip.Prefix]{
	Name: "prefix",
	FromObject: func(e *EntryRow) index.KeySet {
		return index.NewKeySet(index.NetIPPrefix(e.Prefix))
	},
	FromKey:    index.NetIPPrefix,
	FromString: index.NetIPPrefixString,
	Unique:     true,
}

// NewTable creates the table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*EntryRow], error) {
	return statedb.NewTable(db, TableName, PrefixIndex)
}

// TableCell provides the table: statedb.RWTable[*EntryRow] for its one writer
// and statedb.Table[*EntryRow] for readers. It needs a *statedb.DB.
var TableCell = cell.Provide(NewTable, statedb.RWTable[*EntryRow].ToTable)
