package ipcache

import (
	"context"
	"errors"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

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
	Jobs       job.Group
	Source     ClusterSource `optional:"true"`
	Prefixes   PrefixSource  `optional:"true"`
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
	endpoint.SyncJobs(p.Jobs, "ipcache", p.Reconciler.DB, p.Endpoints, anyChange{p.Source, p.Prefixes}, s.sync)
	return nil
}

// clusterSync writes the desired ipcache and remote nodes into their
// tables.
type clusterSync struct {
	ipcache  *Writer
	nodes    *node.Writer
	source   ClusterSource // nil: the local endpoints alone
	prefixes PrefixSource  // nil: no policy prefixes
}

// anyChange wakes on a change of any of its sources that is not nil.
type anyChange []endpoint.Changes

func (a anyChange) OnChange(fn func()) (stop func()) {
	var stops []func()
	for _, c := range a {
		if c != nil {
			stops = append(stops, c.OnChange(fn))
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

func (s *clusterSync) sync(_ context.Context, local []endpoint.Endpoint) error {
	c := Cluster{Local: local}
	if s.source != nil {
		c = s.source.Cluster(local)
	}
	if s.prefixes != nil {
		c.Prefixes = s.prefixes.Prefixes()
	}
	_, _, err := s.ipcache.Replace(DesiredIPCache(c))
	return errors.Join(err, s.nodes.Replace(RemoteNodes(c)))
}
