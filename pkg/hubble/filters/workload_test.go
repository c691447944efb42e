package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestWorkloadFilters(t *testing.T) {
	f := &flow.Flow{Source: &flow.Endpoint{Workloads: []*flow.Workload{{Name: "client", Kind: "Deployment"}}}}
	testBuilder(t, workloadFilters, []builderCase{
		{name: "name and kind", ff: &flow.FlowFilter{SourceWorkload: []*flow.Workload{{Name: "client", Kind: "Deployment"}}}, f: f, want: true},
		{name: "kind only", ff: &flow.FlowFilter{SourceWorkload: []*flow.Workload{{Kind: "Deployment"}}}, f: f, want: true},
		{name: "other kind", ff: &flow.FlowFilter{SourceWorkload: []*flow.Workload{{Name: "client", Kind: "DaemonSet"}}}, f: f, want: false},
		{name: "destination has none", ff: &flow.FlowFilter{DestinationWorkload: []*flow.Workload{{}}}, f: f, want: false},
	})
}
