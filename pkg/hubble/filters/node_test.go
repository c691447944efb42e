package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestNodeNameFilter(t *testing.T) {
	f := tcpFlow() // node-1
	testBuilder(t, nodeNameFilter, []builderCase{
		{name: "pattern", ff: &flow.FlowFilter{NodeName: []string{"node-*"}}, f: f, want: true},
		{name: "cluster part ignored", ff: &flow.FlowFilter{NodeName: []string{"default/node-1"}}, f: f, want: true},
		{name: "other node", ff: &flow.FlowFilter{NodeName: []string{"default/node-2"}}, f: f, want: false},
		{name: "bad pattern", ff: &flow.FlowFilter{NodeName: []string{"node-["}}, err: "node_name"},
	})
}

func TestNodeLabelFilter(t *testing.T) {
	f := &flow.Flow{NodeLabels: []string{"k8s:topology.kubernetes.io/zone=a"}}
	testBuilder(t, nodeLabelFilter, []builderCase{
		{name: "selector", ff: &flow.FlowFilter{NodeLabels: []string{"topology.kubernetes.io/zone in (a, b)"}}, f: f, want: true},
		{name: "other zone", ff: &flow.FlowFilter{NodeLabels: []string{"topology.kubernetes.io/zone=b"}}, f: f, want: false},
		{name: "no labels match no selector", ff: &flow.FlowFilter{NodeLabels: []string{"!zone"}}, f: &flow.Flow{}, want: false},
		{name: "bad", ff: &flow.FlowFilter{NodeLabels: []string{"zone in x"}}, err: "node_labels"},
	})
}
