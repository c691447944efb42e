package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/internal/datapath/spec"
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
	cell.Invoke(registerPublisher),
)

// NotifyEndpoints decorates the endpoint manager's datapath so that every
// endpoint change wakes the watchers' subscribers (the CiliumEndpoint
// publisher and the ipcache). The manager calls it under its lock, so a
// subscriber's List sees the change.
func NotifyEndpoints(dp endpoint.Datapath, w *Watchers) endpoint.Datapath {
	if w == nil {
		return dp
	}
	return notifyingDatapath{Datapath: dp, w: w}
}

type notifyingDatapath struct {
	endpoint.Datapath
	w *Watchers
}

func (d notifyingDatapath) UpsertEndpoint(ep spec.Endpoint) error {
	defer d.w.Notify()
	return d.Datapath.UpsertEndpoint(ep)
}

func (d notifyingDatapath) DeleteEndpoint(ep spec.Endpoint) error {
	defer d.w.Notify()
	return d.Datapath.DeleteEndpoint(ep)
}

func (d notifyingDatapath) PruneEndpoints(keep []spec.Endpoint) error {
	defer d.w.Notify()
	return d.Datapath.PruneEndpoints(keep)
}

func newClients(cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, nil
	}
	return NewClients(cfg)
}

// resync repairs what events missed.
const resync = 10 * time.Minute

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
	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	Health    cell.Health
	Clients   *Clients
	Watchers  *Watchers
	IDs       *PodIdentities
	Endpoints *endpoint.Manager
}

func registerPublisher(p publisherParams) {
	if p.Watchers == nil {
		return
	}
	pub := NewPublisher(p.Clients, p.Watchers, p.IDs)
	runLoop(p.Lifecycle, p.Log, p.Health, p.Watchers.Subscribe(), "CiliumEndpoints published",
		func(ctx context.Context) error { return pub.Sync(ctx, p.Endpoints.List()) })
	// Identities follow labels: a relabelled pod or namespace moves its
	// endpoints to the identity of their new labels.
	relabel := Relabeler{w: p.Watchers, ids: p.IDs, eps: p.Endpoints}
	runLoop(p.Lifecycle, p.Log, p.Health, p.Watchers.Subscribe(), "identities follow labels", relabel.Sync)
}

// runLoop calls sync after every change signal and every resync, and
// retries a failed sync with backoff, from start to stop.
func runLoop(lc cell.Lifecycle, log *slog.Logger, health cell.Health, changes <-chan struct{}, ok string, sync func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			go func() {
				defer close(done)
				loop(ctx, log, health, changes, ok, sync)
			}()
			return nil
		},
		OnStop: func(cell.HookContext) error { cancel(); <-done; return nil },
	})
}

func loop(ctx context.Context, log *slog.Logger, health cell.Health, changes <-chan struct{}, ok string, sync func(context.Context) error) {
	const minRetry = time.Second
	retry := minRetry
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-timer.C:
		}
		timer.Stop()
		if err := sync(ctx); err != nil {
			log.Warn("sync failed, retrying", "error", err, "in", retry)
			health.Degraded("sync failed", err)
			timer.Reset(retry)
			retry = min(2*retry, time.Minute)
			continue
		}
		health.OK(ok)
		retry = minRetry
		timer.Reset(resync)
	}
}
