package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestTraceFilters(t *testing.T) {
	f := &flow.Flow{IpTraceId: &flow.IPTraceID{TraceId: 7},
		TraceContext: &flow.TraceContext{Parent: &flow.TraceParent{TraceId: "4bf92f3577b34da6a3ce929d0e0e4736"}}}
	testBuilder(t, traceFilters, []builderCase{
		{name: "trace", ff: &flow.FlowFilter{TraceId: []string{"4bf92f3577b34da6a3ce929d0e0e4736"}}, f: f, want: true},
		{name: "ip trace", ff: &flow.FlowFilter{IpTraceId: []uint64{7}}, f: f, want: true},
		{name: "other ip trace", ff: &flow.FlowFilter{IpTraceId: []uint64{8}}, f: f, want: false},
		{name: "none", ff: &flow.FlowFilter{TraceId: []string{""}}, f: tcpFlow(), want: true},
	})
}
