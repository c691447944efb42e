package agent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/ipcache"
)

// IPCacheCell writes the desired ipcache table and the routes to other
// nodes' pods from the watchers and the local endpoints; a statedb
// reconciler makes the datapath's ipcache map match the table. It needs
// the kernel datapath.
//
// statedb and the job registry are part of this module because it holds
// the agent's only table; they move to the agent's infrastructure cells
// when a second table arrives (a hive may hold them only once).
var IPCacheCell = cell.Module("ipcache", "The ipcache and remote node routes from Kubernetes",
	ipcache.Cell,
	cell.ProvidePrivate(newJobGroup),
	cell.Invoke(registerIPCache),
)

// newJobGroup runs the module's jobs (the reconciler's) under its health.
func newJobGroup(r job.Registry, h cell.Health, log *slog.Logger) job.Group {
	return r.NewGroup(h, job.WithLogger(log))
}

type ipcacheParams struct {
	cell.In
	Log        *slog.Logger
	Lifecycle  cell.Lifecycle
	Health     cell.Health
	Watchers   *Watchers
	Node       *datapath.Node
	Endpoints  *endpoint.Manager
	Table      statedb.RWTable[*ipcache.Entry]
	Reconciler reconciler.Params
}

func registerIPCache(p ipcacheParams) error {
	if p.Watchers == nil {
		// Without Kubernetes nobody computes the ipcache: leave the map
		// alone rather than prune it empty.
		return nil
	}
	// Before the reconciler starts, so that it prunes nothing until the
	// first sync wrote the table.
	w := ipcache.NewWriter(p.Reconciler.DB, p.Table)
	// The datapath opens its maps when it starts.
	maps := func() ipcache.Map {
		if m := p.Node.Maps(); m != nil {
			return m
		}
		return nil
	}
	if _, err := ipcache.RegisterReconciler(p.Reconciler, p.Table, maps); err != nil {
		return err
	}
	s := newIPCacheSync(w, p.Node)
	runLoop(p.Lifecycle, p.Log, p.Health, p.Watchers.Subscribe(), "ipcache computed",
		func(context.Context) error { return s.sync(p.Watchers.Cluster(p.Endpoints.List())) })
	return nil
}

// RemoteNodeDatapath routes other nodes' pod CIDRs; *datapath.Node is one.
type RemoteNodeDatapath interface {
	UpsertRemoteNode(spec.RemoteNode) error
	DeleteRemoteNode(spec.RemoteNode) error
}

// ipcacheSync writes the desired ipcache into its table and keeps the
// routes to remote nodes' pod CIDRs.
type ipcacheSync struct {
	table  *ipcache.Writer
	routes RemoteNodeDatapath
	// routed is what the last sync routed, to remove what went away.
	routed map[spec.RemoteNode]bool
}

func newIPCacheSync(table *ipcache.Writer, routes RemoteNodeDatapath) *ipcacheSync {
	return &ipcacheSync{table: table, routes: routes, routed: map[spec.RemoteNode]bool{}}
}

func (s *ipcacheSync) sync(c Cluster) error {
	var errs []error
	if _, _, err := s.table.Replace(DesiredIPCache(c)); err != nil {
		errs = append(errs, err)
	}
	want := map[spec.RemoteNode]bool{}
	for _, r := range RemoteNodes(c) {
		want[r] = true
	}
	// Remove first: a node that moved keeps its pod CIDR, and the route
	// to it is deleted by destination.
	for r := range s.routed {
		if want[r] {
			continue
		}
		if err := s.routes.DeleteRemoteNode(r); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.routed, r)
	}
	for _, r := range RemoteNodes(c) {
		if s.routed[r] {
			continue
		}
		if err := s.routes.UpsertRemoteNode(r); err != nil {
			errs = append(errs, err)
			continue
		}
		s.routed[r] = true
	}
	return errors.Join(errs...)
}
