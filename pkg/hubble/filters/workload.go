package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// workloadFilters: source_workload and destination_workload; a workload
// that leaves its name or kind empty matches any.
func workloadFilters(ff *flow.FlowFilter) ([]Func, error) {
	var out []Func
	for _, side := range []struct {
		ws  []*flow.Workload
		get func(*flow.Flow) []*flow.Workload
	}{{ff.GetSourceWorkload(), func(f *flow.Flow) []*flow.Workload { return f.GetSource().GetWorkloads() }},
		{ff.GetDestinationWorkload(), func(f *flow.Flow) []*flow.Workload { return f.GetDestination().GetWorkloads() }}} {
		fs, _ := whenAll(side.ws, func(ws []*flow.Workload) Func {
			return func(f *flow.Flow) bool {
				return slices.ContainsFunc(side.get(f), func(have *flow.Workload) bool {
					return slices.ContainsFunc(ws, func(want *flow.Workload) bool {
						return (want.GetName() == "" || want.GetName() == have.GetName()) && (want.GetKind() == "" || want.GetKind() == have.GetKind())
					})
				})
			}
		})
		out = append(out, fs...)
	}
	return out, nil
}
