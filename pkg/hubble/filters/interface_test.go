package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestInterfaceFilter(t *testing.T) {
	f := &flow.Flow{Interface: &flow.NetworkInterface{Index: 7, Name: "eth0"}}
	testBuilder(t, interfaceFilter, []builderCase{
		{name: "index", ff: &flow.FlowFilter{Interface: []*flow.NetworkInterface{{Index: 7}}}, f: f, want: true},
		{name: "name", ff: &flow.FlowFilter{Interface: []*flow.NetworkInterface{{Name: "eth0"}}}, f: f, want: true},
		{name: "other name", ff: &flow.FlowFilter{Interface: []*flow.NetworkInterface{{Index: 7, Name: "eth1"}}}, f: f, want: false},
		{name: "no interface", ff: &flow.FlowFilter{Interface: []*flow.NetworkInterface{{}}}, f: &flow.Flow{}, want: false},
	})
}
