package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// directionFilter: traffic_direction, as the endpoint sees it.
func directionFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetTrafficDirection(), func(v []flow.TrafficDirection) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetTrafficDirection()) }
	})
}

// replyFilter: whether the flow is a reply of its connection.
func replyFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetReply(), func(v []bool) Func {
		return func(f *flow.Flow) bool {
			// As Hubble: a drop whose direction is unknown counts as no reply.
			if f.GetIsReply() == nil && f.GetVerdict() != flow.Verdict_DROPPED {
				return false
			}
			return slices.Contains(v, f.GetIsReply().GetValue())
		}
	})
}
