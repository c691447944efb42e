// Package node is the cluster's nodes as this agent knows them: Node and
// Cluster (cluster.go), which read the Node and CiliumNode tables and are
// what every consumer asks about nodes; and the routes to other nodes'
// pods, a statedb table (RouteRow) that the ipcache's cell writes with a
// Writer, and the reconciler that makes the datapath's routes match it.
package node

import (
	"context"
	"errors"
	"iter"
	"net/netip"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
)

// TableName is the table's name in statedb.
const TableName = "node-routes"

// RouteRow is a row: another node's pod CIDR, routed to that node.
type RouteRow struct {
	spec.RemoteNode
	Status reconciler.Status
}

// TableHeader implements statedb.TableWritable.
func (*RouteRow) TableHeader() []string { return []string{"PodCIDR", "Node", "Status"} }

// TableRow implements statedb.TableWritable.
func (r *RouteRow) TableRow() []string {
	return []string{r.PodCIDR.String(), r.IPv4.String(), r.Status.String()}
}

// Clone implements desired.Row.
func (r *RouteRow) Clone() *RouteRow {
	c := *r
	return &c
}

// GetStatus implements desired.Row.
func (r *RouteRow) GetStatus() reconciler.Status { return r.Status }

// WithStatus implements desired.Row.
func (r *RouteRow) WithStatus(s reconciler.Status) *RouteRow {
	r.Status = s
	return r
}

// PodCIDRIndex is the primary index: one route per pod CIDR.
var PodCIDRIndex = statedb.Index[*RouteRow, netip.Prefix]{
	Name: "pod-cidr",
	FromObject: func(r *RouteRow) index.KeySet {
		return index.NewKeySet(index.NetIPPrefix(r.PodCIDR))
	},
	FromKey:    index.NetIPPrefix,
	FromString: index.NetIPPrefixString,
	Unique:     true,
}

// NewTable creates the table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*RouteRow], error) {
	return statedb.NewTable(db, TableName, PodCIDRIndex)
}

// TableCell provides the table: statedb.RWTable[*RouteRow] for its one writer
// and statedb.Table[*RouteRow] for readers. It needs a *statedb.DB.
var TableCell = cell.Provide(NewTable, statedb.RWTable[*RouteRow].ToTable)

// Routes is the datapath's side; *datapath.Node is one.
type Routes interface {
	UpsertRemoteNode(spec.RemoteNode) error
	DeleteRemoteNode(spec.RemoteNode) error
	// RemoteNodes lists the remote-node routes the datapath installed.
	RemoteNodes() ([]spec.RemoteNode, error)
}

// RegisterReconciler makes routes hold what tbl says.
func RegisterReconciler(p reconciler.Params, tbl statedb.RWTable[*RouteRow], routes Routes) error {
	_, err := desired.Register(p, tbl, ops{routes})
	return err
}

type ops struct{ routes Routes }

// Update implements reconciler.Operations.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *RouteRow) error {
	return o.routes.UpsertRemoteNode(r.RemoteNode)
}

// Delete implements reconciler.Operations.
func (o ops) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *RouteRow) error {
	return o.routes.DeleteRemoteNode(r.RemoteNode)
}

// Prune implements reconciler.Operations: routes of ours that no row
// wants go (a node that left while the agent was away), and wanted routes
// that are missing come back (someone deleted them by hand).
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*RouteRow, statedb.Revision]) error {
	current, err := o.routes.RemoteNodes()
	if err != nil {
		return err
	}
	installed := map[netip.Prefix]bool{}
	var errs []error
	want := map[netip.Prefix]bool{}
	for r := range rows {
		want[r.PodCIDR] = true
	}
	for _, c := range current {
		installed[c.PodCIDR] = true
		if !want[c.PodCIDR] {
			errs = append(errs, o.routes.DeleteRemoteNode(c))
		}
	}
	for r := range rows {
		if !installed[r.PodCIDR] {
			errs = append(errs, o.routes.UpsertRemoteNode(r.RemoteNode))
		}
	}
	return errors.Join(errs...)
}

// Writer replaces the table's contents with the remote nodes wanted now.
// It is the table's only writer.
type Writer struct {
	w *desired.Writer[netip.Prefix, *RouteRow]
}

// NewWriter registers the writer as the table's initializer, so that
// nothing is pruned before its first Replace. Call it before the
// reconciler starts.
func NewWriter(db *statedb.DB, tbl statedb.RWTable[*RouteRow]) *Writer {
	return &Writer{w: desired.NewWriter(db, tbl, PodCIDRIndex,
		func(r *RouteRow) netip.Prefix { return r.PodCIDR },
		func(a, b *RouteRow) bool { return a.RemoteNode == b.RemoteNode })}
}

// Replace makes the table hold exactly nodes, in one transaction; rows
// that did not change are left alone.
func (w *Writer) Replace(nodes []spec.RemoteNode) error {
	want := make(map[netip.Prefix]*RouteRow, len(nodes))
	for _, n := range nodes {
		n.PodCIDR = n.PodCIDR.Masked()
		want[n.PodCIDR] = &RouteRow{RemoteNode: n}
	}
	_, _, err := w.w.Replace(want)
	return err
}
