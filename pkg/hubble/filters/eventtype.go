package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// eventTypeFilter: Cilium's monitor event type (0: any), and its sub type
// when the filter asks to match it.
func eventTypeFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetEventType(), func(v []*flow.EventTypeFilter) Func {
		return func(f *flow.Flow) bool {
			have := f.GetEventType()
			return have != nil && slices.ContainsFunc(v, func(want *flow.EventTypeFilter) bool {
				return (want.GetType() == 0 || want.GetType() == have.GetType()) &&
					(!want.GetMatchSubType() || want.GetSubType() == have.GetSubType())
			})
		}
	})
}
