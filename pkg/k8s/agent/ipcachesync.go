package agent

import (
	"context"
	"errors"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/node"
)

// IPCacheCell computes the desired ipcache and the remote nodes to route
// to from the local endpoints and, with Kubernetes on, the watchers; it
// writes them into their tables, whose reconcilers make the datapath's
// ipcache map and routes match. Without Kubernetes the ipcache holds the
// local endpoints.
var IPCacheCell = cell.Module("ipcache", "The ipcache and remote node routes",
	ipcache.Cell,
	node.Cell,
	health.JobGroup,
	cell.Invoke(registerIPCache),
)

type ipcacheParams struct {
	cell.In
	Jobs       job.Group
	Watchers   *Watchers
	Map        ipcache.MapSource
	Routes     node.Routes
	Endpoints  statedb.Table[*endpoint.Desired]
	Table      statedb.RWTable[*ipcache.Entry]
	Nodes      statedb.RWTable[*node.Remote]
	Reconciler reconciler.Params
}

func registerIPCache(p ipcacheParams) error {
	// The writers register before the reconcilers start, so that these
	// prune nothing until the first sync wrote the tables.
	s := &ipcacheSync{
		ipcache: ipcache.NewWriter(p.Reconciler.DB, p.Table),
		nodes:   node.NewWriter(p.Reconciler.DB, p.Nodes),
		cluster: func(local []endpoint.Endpoint) Cluster { return Cluster{Local: local} },
	}
	if p.Watchers != nil {
		s.cluster = p.Watchers.Cluster
	}
	if _, err := ipcache.RegisterReconciler(p.Reconciler, p.Table, p.Map); err != nil {
		return err
	}
	if err := node.RegisterReconciler(p.Reconciler, p.Nodes, p.Routes); err != nil {
		return err
	}
	SyncJobs(p.Jobs, "ipcache", p.Reconciler.DB, p.Endpoints, p.Watchers, s.sync)
	return nil
}

// ipcacheSync writes the desired ipcache and remote nodes into their tables.
type ipcacheSync struct {
	ipcache *ipcache.Writer
	nodes   *node.Writer
	// cluster is the view the tables are computed from.
	cluster func(local []endpoint.Endpoint) Cluster
}

func (s *ipcacheSync) sync(_ context.Context, local []endpoint.Endpoint) error {
	c := s.cluster(local)
	_, _, err := s.ipcache.Replace(DesiredIPCache(c))
	return errors.Join(err, s.nodes.Replace(RemoteNodes(c)))
}
