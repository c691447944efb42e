package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// uuidFilter: the flows of the given ids.
func uuidFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetUuid(), func(v []string) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetUuid()) }
	})
}
