package ciliumendpoint

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

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
	endpoint.SyncJobs(p.Jobs, "ciliumendpoints", p.DB, p.Endpoints, p.Watchers, pub.Sync)
}
