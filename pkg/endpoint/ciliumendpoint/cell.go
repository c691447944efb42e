package ciliumendpoint

import (
	"context"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
)

// Cell publishes the CiliumEndpoints of the local endpoints while
// Kubernetes is on.
var Cell = cell.Module("ciliumendpoint", "CiliumEndpoints of the local endpoints",
	health.JobGroup,
	cell.Invoke(registerPublisher),
)

type publisherParams struct {
	cell.In
	Jobs      job.Group
	Clients   *agent.Clients
	Watchers  *agent.Watchers
	IDs       *allocator.PodIdentities
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.Desired]
}

func registerPublisher(p publisherParams) {
	if p.Watchers == nil {
		return
	}
	pub := NewPublisher(p.Clients, p.Watchers, p.IDs)
	t := p.Watchers.Tables()
	// What the objects say: the pods (owners, labels), this node's address,
	// and the CiliumEndpoints as they are (a stray one goes, a changed one
	// is put back).
	inputs := []desired.Input{desired.TableInput(p.Endpoints), desired.TableInput(t.Pods),
		desired.TableInput(t.Nodes), desired.TableInput(t.CiliumNodes), desired.TableInput(t.CiliumEndpoints)}
	desired.Controller(p.Jobs, "ciliumendpoints", p.DB, inputs, func(ctx context.Context, txn statedb.ReadTxn) error {
		return pub.Sync(ctx, endpoint.Local(txn, p.Endpoints))
	})
}
