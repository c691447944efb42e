package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestProtocolFilter(t *testing.T) {
	icmp := &flow.Flow{L4: &flow.Layer4{Protocol: &flow.Layer4_ICMPv4{ICMPv4: &flow.ICMPv4{Type: 8}}}}
	testBuilder(t, protocolFilter, []builderCase{
		{name: "any case", ff: &flow.FlowFilter{Protocol: []string{"UDP", "tcp"}}, f: tcpFlow(), want: true},
		{name: "other", ff: &flow.FlowFilter{Protocol: []string{"icmp"}}, f: tcpFlow(), want: false},
		{name: "icmp is either", ff: &flow.FlowFilter{Protocol: []string{"icmp"}}, f: icmp, want: true},
		{name: "icmpv6", ff: &flow.FlowFilter{Protocol: []string{"icmpv6"}}, f: icmp, want: false},
		{name: "unknown", ff: &flow.FlowFilter{Protocol: []string{"gre"}}, err: "protocol"},
	})
}
