package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestIdentityFilters(t *testing.T) {
	f := tcpFlow()
	testBuilder(t, identityFilters, []builderCase{
		{name: "both", ff: &flow.FlowFilter{SourceIdentity: []uint32{300}, DestinationIdentity: []uint32{1, 400}}, f: f, want: true},
		{name: "one side fails", ff: &flow.FlowFilter{SourceIdentity: []uint32{300}, DestinationIdentity: []uint32{1}}, f: f, want: false},
		{name: "swapped", ff: &flow.FlowFilter{SourceIdentity: []uint32{400}}, f: f, want: false},
	})
}
