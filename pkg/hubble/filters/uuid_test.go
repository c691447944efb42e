package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestUUIDFilter(t *testing.T) {
	testBuilder(t, uuidFilter, []builderCase{
		{name: "one of", ff: &flow.FlowFilter{Uuid: []string{"u2", "u1"}}, f: tcpFlow(), want: true},
		{name: "none of", ff: &flow.FlowFilter{Uuid: []string{"u2"}}, f: tcpFlow(), want: false},
	})
}
