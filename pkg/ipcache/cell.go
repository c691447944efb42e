package ipcache

import (
	"context"
	"errors"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/node"
)

// Cell computes the desired ipcache and the remote nodes to route to from
// the local endpoints and the ClusterSource (none with Kubernetes off:
// then the ipcache holds the local endpoints alone). It writes them into
// their tables, whose reconcilers make the datapath's ipcache map and
// routes match.
var Cell = cell.Module("ipcache", "The ipcache and remote node routes",
	TableCell,
	node.TableCell,
	health.JobGroup,
	cell.Invoke(register),
)

type params struct {
	cell.In
	Jobs   job.Group
	Source ClusterSource `optional:"true"`
	// Prefixes are the prefixes that policy rules name: none without
	// the policy engine.
	Prefixes   statedb.Table[*PolicyPrefix] `optional:"true"`
	Map        MapSource
	Routes     node.Routes
	Endpoints  statedb.Table[*endpoint.Desired]
	Table      statedb.RWTable[*Entry]
	Nodes      statedb.RWTable[*node.Remote]
	Reconciler reconciler.Params
}

func register(p params) error {
	// The writers register before the reconcilers start, so that these
	// prune nothing until the first sync wrote the tables.
	s := &clusterSync{ipcache: NewWriter(p.Reconciler.DB, p.Table), nodes: node.NewWriter(p.Reconciler.DB, p.Nodes),
		source: p.Source, prefixes: p.Prefixes}
	if _, err := RegisterReconciler(p.Reconciler, p.Table, p.Map); err != nil {
		return err
	}
	if err := node.RegisterReconciler(p.Reconciler, p.Nodes, p.Routes); err != nil {
		return err
	}
	inputs := []desired.Input{desired.TableInput(p.Endpoints)}
	if p.Source != nil {
		inputs = append(inputs, p.Source.ClusterInputs()...)
	}
	if p.Prefixes != nil {
		// Initialized once the policy engine wrote it first: the first
		// entries carry the CIDR identities that the policy maps name.
		inputs = append(inputs, desired.TableInput(p.Prefixes))
	}
	desired.Controller(p.Jobs, "ipcache", p.Reconciler.DB, inputs, func(ctx context.Context, txn statedb.ReadTxn) error {
		return s.sync(ctx, txn, endpoint.Local(txn, p.Endpoints))
	})
	return nil
}

// clusterSync writes the desired ipcache and remote nodes into their
// tables.
type clusterSync struct {
	ipcache  *Writer
	nodes    *node.Writer
	source   ClusterSource                // nil: the local endpoints alone
	prefixes statedb.Table[*PolicyPrefix] // nil: no policy prefixes
}

func (s *clusterSync) sync(_ context.Context, txn statedb.ReadTxn, local []endpoint.Endpoint) error {
	c := Cluster{Local: local}
	if s.source != nil {
		c = s.source.Cluster(txn, local)
	}
	if s.prefixes != nil {
		for p := range s.prefixes.All(txn) {
			c.Prefixes = append(c.Prefixes, *p)
		}
	}
	_, _, err := s.ipcache.Replace(DesiredIPCache(c))
	return errors.Join(err, s.nodes.Replace(RemoteNodes(c)))
}
