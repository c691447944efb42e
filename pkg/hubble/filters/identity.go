package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// identityFilters: source_identity and destination_identity, by number.
func identityFilters(ff *flow.FlowFilter) ([]Func, error) {
	src, _ := whenAll(ff.GetSourceIdentity(), func(v []uint32) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetSource().GetIdentity()) }
	})
	dst, _ := whenAll(ff.GetDestinationIdentity(), func(v []uint32) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetDestination().GetIdentity()) }
	})
	return append(src, dst...), nil
}
