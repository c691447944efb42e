package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestNameFilters(t *testing.T) {
	f := tcpFlow()
	testBuilder(t, nameFilters, []builderCase{
		{name: "namespace and prefix", ff: &flow.FlowFilter{SourcePod: []string{"x/client"}}, f: f, want: true},
		{name: "namespace", ff: &flow.FlowFilter{SourcePod: []string{"x/"}}, f: f, want: true},
		{name: "bare name is in default", ff: &flow.FlowFilter{SourcePod: []string{"client"}}, f: f, want: false},
		{name: "any namespace", ff: &flow.FlowFilter{DestinationPod: []string{"/server"}}, f: f, want: true},
		{name: "service", ff: &flow.FlowFilter{DestinationService: []string{"y/web"}}, f: f, want: true},
		{name: "no service", ff: &flow.FlowFilter{SourceService: []string{"/"}}, f: f, want: false},
		{name: "empty", ff: &flow.FlowFilter{DestinationService: []string{""}}, err: "destination_service"},
	})
}
