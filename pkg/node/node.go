// Package node holds the routes to other nodes' pods: a statedb table of
// the remote nodes this node should route to, and the reconciler that
// makes the datapath's routes match it. Whoever knows the cluster (the
// Kubernetes watchers) writes the table with a Writer.
package node

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// TableName is the table's name in statedb.
const TableName = "remote-nodes"

// Remote is a row: a node whose pod CIDR this node routes to it.
type Remote struct {
	spec.RemoteNode
	Status reconciler.Status
}

// TableHeader implements statedb.TableWritable.
func (*Remote) TableHeader() []string { return []string{"PodCIDR", "Node", "Status"} }

// TableRow implements statedb.TableWritable.
func (r *Remote) TableRow() []string {
	return []string{r.PodCIDR.String(), r.IPv4.String(), r.Status.String()}
}

func (r *Remote) clone() *Remote {
	c := *r
	return &c
}

func (r *Remote) getStatus() reconciler.Status { return r.Status }

func (r *Remote) setStatus(s reconciler.Status) *Remote {
	r.Status = s
	return r
}

// PodCIDRIndex is the primary index: one route per pod CIDR.
var PodCIDRIndex = statedb.Index[*Remote, netip.Prefix]{
	Name: "pod-cidr",
	FromObject: func(r *Remote) index.KeySet {
		return index.NewKeySet(index.NetIPPrefix(r.PodCIDR))
	},
	FromKey:    index.NetIPPrefix,
	FromString: index.NetIPPrefixString,
	Unique:     true,
}

// NewTable creates the table and registers it with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*Remote], error) {
	return statedb.NewTable(db, TableName, PodCIDRIndex)
}

// Cell provides the table: statedb.RWTable[*Remote] for its one writer
// and statedb.Table[*Remote] for readers. It needs a *statedb.DB.
var Cell = cell.Provide(NewTable, statedb.RWTable[*Remote].ToTable)

// Routes is the datapath's side; *datapath.Node is one.
type Routes interface {
	UpsertRemoteNode(spec.RemoteNode) error
	DeleteRemoteNode(spec.RemoteNode) error
	// RemoteNodes lists the remote-node routes the datapath installed.
	RemoteNodes() ([]spec.RemoteNode, error)
}

// PruneInterval is how often the reconciler compares the kernel's routes
// with the table, removing routes nobody wants and restoring missing ones.
const PruneInterval = time.Minute

// RegisterReconciler makes routes hold what tbl says.
func RegisterReconciler(p reconciler.Params, tbl statedb.RWTable[*Remote], routes Routes) error {
	_, err := reconciler.Register(p, tbl,
		(*Remote).clone, (*Remote).setStatus, (*Remote).getStatus,
		ops{routes}, nil,
		reconciler.WithName(TableName),
		reconciler.WithPruning(PruneInterval),
		reconciler.WithRetry(100*time.Millisecond, time.Minute),
	)
	if err != nil {
		return fmt.Errorf("register remote node reconciler: %w", err)
	}
	return nil
}

type ops struct{ routes Routes }

// Update implements reconciler.Operations.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Remote) error {
	return o.routes.UpsertRemoteNode(r.RemoteNode)
}

// Delete implements reconciler.Operations.
func (o ops) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Remote) error {
	return o.routes.DeleteRemoteNode(r.RemoteNode)
}

// Prune implements reconciler.Operations: routes of ours that no row
// wants go (a node that left while the agent was away), and wanted routes
// that are missing come back (someone deleted them by hand).
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*Remote, statedb.Revision]) error {
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
	db  *statedb.DB
	tbl statedb.RWTable[*Remote]

	mu       sync.Mutex
	initDone func(statedb.WriteTxn)
}

// NewWriter registers the writer as the table's initializer, so that
// nothing is pruned before its first Replace. Call it before the
// reconciler starts.
func NewWriter(db *statedb.DB, tbl statedb.RWTable[*Remote]) *Writer {
	txn := db.WriteTxn(tbl)
	done := tbl.RegisterInitializer(txn, "remote-node-writer")
	txn.Commit()
	return &Writer{db: db, tbl: tbl, initDone: done}
}

// Replace makes the table hold exactly nodes, in one transaction; rows
// that did not change are left alone.
func (w *Writer) Replace(nodes []spec.RemoteNode) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := make(map[netip.Prefix]spec.RemoteNode, len(nodes))
	for _, n := range nodes {
		n.PodCIDR = n.PodCIDR.Masked()
		want[n.PodCIDR] = n
	}
	txn := w.db.WriteTxn(w.tbl)
	defer txn.Abort()
	for r := range w.tbl.All(txn) {
		if _, ok := want[r.PodCIDR]; !ok {
			if _, _, err := w.tbl.Delete(txn, r); err != nil {
				return fmt.Errorf("delete %s: %w", r.PodCIDR, err)
			}
		}
	}
	for p, n := range want {
		if cur, _, ok := w.tbl.Get(txn, PodCIDRIndex.Query(p)); ok && cur.RemoteNode == n {
			continue
		}
		if _, _, err := w.tbl.Insert(txn, &Remote{RemoteNode: n, Status: reconciler.StatusPending()}); err != nil {
			return fmt.Errorf("insert %s: %w", p, err)
		}
	}
	if w.initDone != nil {
		w.initDone(txn)
		w.initDone = nil
	}
	txn.Commit()
	return nil
}
