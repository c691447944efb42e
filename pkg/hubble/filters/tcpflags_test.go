package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestTCPFlagsFilter(t *testing.T) {
	f := tcpFlow() // SYN
	testBuilder(t, tcpFlagsFilter, []builderCase{
		{name: "one of the sets", ff: &flow.FlowFilter{TcpFlags: []*flow.TCPFlags{{SYN: true, ACK: true}, {SYN: true}}}, f: f, want: true},
		{name: "every flag of a set", ff: &flow.FlowFilter{TcpFlags: []*flow.TCPFlags{{SYN: true, ACK: true}}}, f: f, want: false},
		{name: "not tcp", ff: &flow.FlowFilter{TcpFlags: []*flow.TCPFlags{{}}}, f: &flow.Flow{}, want: false},
	})
}
