package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// interfaceFilter: the device the packet was seen on; an interface that
// leaves its index or name empty matches any.
func interfaceFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetInterface(), func(v []*flow.NetworkInterface) Func {
		return func(f *flow.Flow) bool {
			have := f.GetInterface()
			return have != nil && slices.ContainsFunc(v, func(want *flow.NetworkInterface) bool {
				return (want.GetIndex() == 0 || want.GetIndex() == have.GetIndex()) && (want.GetName() == "" || want.GetName() == have.GetName())
			})
		}
	})
}
