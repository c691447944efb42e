package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestPortFilters(t *testing.T) {
	f := tcpFlow()
	udp := &flow.Flow{L4: &flow.Layer4{Protocol: &flow.Layer4_UDP{UDP: &flow.UDP{SourcePort: 53000, DestinationPort: 53}}}}
	icmp := &flow.Flow{L4: &flow.Layer4{Protocol: &flow.Layer4_ICMPv4{ICMPv4: &flow.ICMPv4{Type: 8}}}}
	testBuilder(t, portFilters, []builderCase{
		{name: "destination", ff: &flow.FlowFilter{DestinationPort: []string{"443", "80"}}, f: f, want: true},
		{name: "source is not destination", ff: &flow.FlowFilter{SourcePort: []string{"80"}}, f: f, want: false},
		{name: "udp", ff: &flow.FlowFilter{DestinationPort: []string{"53"}}, f: udp, want: true},
		{name: "icmp has none", ff: &flow.FlowFilter{DestinationPort: []string{"0"}}, f: icmp, want: false},
		{name: "name", ff: &flow.FlowFilter{DestinationPort: []string{"http"}}, err: "destination_port"},
		{name: "too large", ff: &flow.FlowFilter{SourcePort: []string{"65536"}}, err: "source_port"},
	})
}
