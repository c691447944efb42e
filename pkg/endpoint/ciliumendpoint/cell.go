package ciliumendpoint

import (
	"context"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/node"
)

// Cell publishes the CiliumEndpoints of the local endpoints while
// Kubernetes is on.
var Cell = cell.Module("ciliumendpoint", "CiliumEndpoints of the local endpoints",
	health.JobGroup,
	cell.Invoke(registerPublisher),
)

type publisherParams struct {
	cell.In
	Jobs            job.Group
	Clients         *agent.Clients `optional:"true"`
	Nodes           *node.Cluster  `optional:"true"`
	IDs             *allocator.PodIdentities
	DB              *statedb.DB
	Endpoints       statedb.Table[*endpoint.EndpointRow]
	Pods            statedb.Table[*corev1.Pod]
	CiliumEndpoints statedb.Table[*v2.CiliumEndpoint]
}

func registerPublisher(p publisherParams) {
	if p.Clients == nil {
		return
	}
	pub := NewPublisher(p.Clients, p.Nodes, p.Pods, p.CiliumEndpoints, p.IDs)
	inputs := append([]desired.Input{desired.TableInput(p.Endpoints)}, pub.Inputs()...)
	desired.Controller(p.Jobs, "ciliumendpoints", p.DB, inputs, func(ctx context.Context, txn statedb.ReadTxn) error {
		return pub.Sync(ctx, txn, endpoint.Local(txn, p.Endpoints))
	})
}
