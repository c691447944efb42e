package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// traceFilters: trace_id (of the trace context an L7 proxy saw) and
// ip_trace_id (of the IP option), which flows carry only when another
// part sets them.
func traceFilters(ff *flow.FlowFilter) ([]Func, error) {
	ids, _ := whenAll(ff.GetTraceId(), func(v []string) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetTraceContext().GetParent().GetTraceId()) }
	})
	ipIDs, _ := whenAll(ff.GetIpTraceId(), func(v []uint64) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetIpTraceId().GetTraceId()) }
	})
	return append(ids, ipIDs...), nil
}
