package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestClusterFilters(t *testing.T) {
	f := &flow.Flow{Source: &flow.Endpoint{ClusterName: "east"}}
	testBuilder(t, clusterFilters, []builderCase{
		{name: "source", ff: &flow.FlowFilter{SourceClusterName: []string{"west", "east"}}, f: f, want: true},
		{name: "destination has none", ff: &flow.FlowFilter{DestinationClusterName: []string{"east"}}, f: f, want: false},
		{name: "empty", ff: &flow.FlowFilter{SourceClusterName: []string{""}}, err: "source_cluster_name"},
	})
}
