package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestLabelFilters(t *testing.T) {
	f := tcpFlow()
	testBuilder(t, labelFilters, []builderCase{
		{name: "any source", ff: &flow.FlowFilter{SourceLabel: []string{"app=client"}}, f: f, want: true},
		{name: "its source", ff: &flow.FlowFilter{SourceLabel: []string{"k8s:app=client"}}, f: f, want: true},
		{name: "another source", ff: &flow.FlowFilter{SourceLabel: []string{"reserved:app=client"}}, f: f, want: false},
		{name: "every term", ff: &flow.FlowFilter{DestinationLabel: []string{"app=server,tier in (web, db)"}}, f: f, want: true},
		{name: "a term fails", ff: &flow.FlowFilter{DestinationLabel: []string{"app=server,!tier"}}, f: f, want: false},
		{name: "any selector", ff: &flow.FlowFilter{DestinationLabel: []string{"app=x", "tier notin (db)"}}, f: f, want: true},
		{name: "bad", ff: &flow.FlowFilter{SourceLabel: []string{"app in x"}}, err: "source_label"},
	})
}
