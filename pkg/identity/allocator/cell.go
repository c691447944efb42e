package allocator

import (
	"context"

	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
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

type identitiesParams struct {
	cell.In
	Log        *slog.Logger
	Config     agent.Config
	Clients    *agent.Clients `optional:"true"`
	DB         *statedb.DB
	Identities statedb.Table[*v2.CiliumIdentity]
}

func newIdentities(p identitiesParams) (identityOut, error) {
	c := p.Clients
	if c == nil {
		return identityOut{Allocator: endpoint.NewInitIdentityAllocator()}, nil
	}
	ids, err := NewAllocator(c.Cilium.CiliumV2().CiliumIdentities(), p.Log, AllocatorConfig{
		Cache: func(name string) (*v2.CiliumIdentity, bool) { return tables.Get(p.DB.ReadTxn(), p.Identities, name) },
	})
	if err != nil {
		return identityOut{}, err
	}
	pods := NewPodIdentities(c.Kube, ids, labels.DefaultFilter(), p.Config.ClusterName)
	return identityOut{Allocator: pods, Pods: pods}, nil
}

type relabelParams struct {
	cell.In
	Jobs       job.Group
	IDs        *PodIdentities
	Manager    *endpoint.Manager
	DB         *statedb.DB
	Endpoints  statedb.Table[*endpoint.EndpointRow]
	Pods       statedb.Table[*corev1.Pod]
	Namespaces statedb.Table[*corev1.Namespace]
}

// registerRelabel: identities follow labels, so a relabelled pod or
// namespace moves its endpoints to the identity of their new labels.
func registerRelabel(p relabelParams) {
	if p.IDs == nil {
		return // Kubernetes off: every endpoint has the init identity
	}
	relabel := Relabeler{pods: p.Pods, namespaces: p.Namespaces, ids: p.IDs, eps: p.Manager}
	inputs := []desired.Input{desired.TableInput(p.Endpoints), desired.TableInput(p.Pods), desired.TableInput(p.Namespaces)}
	desired.Controller(p.Jobs, "relabel", p.DB, inputs, func(ctx context.Context, txn statedb.ReadTxn) error {
		return relabel.Sync(ctx, txn, endpoint.Local(txn, p.Endpoints))
	})
}
