package allocator

import (
	"context"

	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/labels"
)

// Cell provides the endpoint.IdentityAllocator: the identity of the pod's
// labels through CiliumIdentities, or the init identity with Kubernetes
// off. It moves endpoints to a new identity when their labels change.
var Cell = cell.Module("identity", "Pod identities from labels through CiliumIdentities",
	cell.Provide(newIdentities),
	health.JobGroup,
	cell.Invoke(registerRelabel),
)

type identityOut struct {
	cell.Out
	Allocator endpoint.IdentityAllocator
	Pods      *PodIdentities
}

func newIdentities(log *slog.Logger, cfg agent.Config, c *agent.Clients, w *agent.Watchers) (identityOut, error) {
	if c == nil {
		return identityOut{Allocator: endpoint.NewInitIdentityAllocator()}, nil
	}
	ids, err := NewAllocator(c.Cilium.CiliumV2().CiliumIdentities(), log, AllocatorConfig{
		Cache: w.CiliumIdentity,
	})
	if err != nil {
		return identityOut{}, err
	}
	p := NewPodIdentities(c.Kube, ids, labels.DefaultFilter(), cfg.ClusterName)
	return identityOut{Allocator: p, Pods: p}, nil
}

type relabelParams struct {
	cell.In
	Jobs      job.Group
	Watchers  *agent.Watchers
	IDs       *PodIdentities
	Manager   *endpoint.Manager
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.Desired]
}

// registerRelabel: identities follow labels, so a relabelled pod or
// namespace moves its endpoints to the identity of their new labels.
func registerRelabel(p relabelParams) {
	if p.Watchers == nil {
		return
	}
	relabel := Relabeler{w: p.Watchers, ids: p.IDs, eps: p.Manager}
	t := p.Watchers.Tables()
	inputs := []desired.Input{desired.TableInput(p.Endpoints), desired.TableInput(t.Pods), desired.TableInput(t.Namespaces)}
	desired.Controller(p.Jobs, "relabel", p.DB, inputs, func(ctx context.Context, txn statedb.ReadTxn) error {
		return relabel.Sync(ctx, endpoint.Local(txn, p.Endpoints))
	})
}
