package agent

import (
	"context"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/pkg/ipcache"
)

// Cell connects to Kubernetes and provides *Clients and *Watchers, the
// ipcache's ClusterSource, the API's node list, and the Services and
// EndpointSlices (*ServiceSource) that are the load balancer's Source and
// that policies' toServices read, and the Events the load balancer warns
// Services' authors with (all nil with Kubernetes off).
var Cell = cell.Module("k8s", "Kubernetes clients and watchers",
	cell.Config(DefaultConfig),
	cell.Provide(newClients, newWatchers, newClusterSource, newNodeLister, newServiceSource, loadBalancerSource,
		newServiceEvents),
)

// resync is how often the informers replay their caches, which repairs
// what a handler missed.
const resync = 10 * time.Minute

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

func newClusterSource(w *Watchers) ipcache.ClusterSource {
	if w == nil {
		return nil
	}
	return w
}
