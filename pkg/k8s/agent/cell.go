package agent

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/labels"
)

// Cell connects to Kubernetes and provides *Clients and *Watchers (both
// nil with Kubernetes off), the endpoint.IdentityAllocator (pod labels,
// or the init identity with Kubernetes off), the node's pod CIDR from its
// CiliumNode, and publishes CiliumEndpoints.
var Cell = cell.Module("k8s", "Kubernetes watchers and pod identities and CiliumEndpoints",
	cell.Config(DefaultConfig),
	cell.Provide(newClients, newWatchers, newIdentities, newPodCIDRSource, newNodeLister),
	cell.ProvidePrivate(newJobGroup),
	cell.Invoke(registerPublisher),
)

func newClients(cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, nil
	}
	return NewClients(cfg)
}

func newWatchers(lc cell.Lifecycle, cfg Config, c *Clients) *Watchers {
	if c == nil {
		return nil
	}
	w := NewWatchers(c, cfg.K8sNodeName, resync)
	ctx, cancel := context.WithCancel(context.Background())
	lc.Append(cell.Hook{
		// Identities and ipcache read the caches: start only once they
		// hold the cluster.
		OnStart: func(hc cell.HookContext) error {
			w.Run(ctx)
			return w.WaitForSync(hc)
		},
		OnStop: func(cell.HookContext) error { cancel(); return nil },
	})
	return w
}

type identityOut struct {
	cell.Out
	Allocator endpoint.IdentityAllocator
	Pods      *PodIdentities
}

func newIdentities(log *slog.Logger, c *Clients, w *Watchers) (identityOut, error) {
	if c == nil {
		return identityOut{Allocator: endpoint.NewInitIdentityAllocator()}, nil
	}
	ids, err := allocator.NewAllocator(c.Cilium.CiliumV2().CiliumIdentities(), log, allocator.AllocatorConfig{
		Cache: client.NewLister[*v2.CiliumIdentity](w.CiliumIdentities, "ciliumidentities"),
	})
	if err != nil {
		return identityOut{}, err
	}
	p := NewPodIdentities(c.Kube, ids, labels.DefaultFilter())
	return identityOut{Allocator: p, Pods: p}, nil
}

type publisherParams struct {
	cell.In
	Jobs      job.Group
	Clients   *Clients
	Watchers  *Watchers
	IDs       *PodIdentities
	Manager   *endpoint.Manager
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.Desired]
}

func registerPublisher(p publisherParams) {
	if p.Watchers == nil {
		return
	}
	pub := NewPublisher(p.Clients, p.Watchers, p.IDs)
	syncJobs(p.Jobs, "ciliumendpoints", p.DB, p.Endpoints, p.Watchers, pub.Sync)
	// Identities follow labels: a relabelled pod or namespace moves its
	// endpoints to the identity of their new labels.
	relabel := Relabeler{w: p.Watchers, ids: p.IDs, eps: p.Manager}
	syncJobs(p.Jobs, "relabel", p.DB, p.Endpoints, p.Watchers, relabel.Sync)
}
