package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestVerdictFilters(t *testing.T) {
	f := tcpFlow()
	testBuilder(t, verdictFilters, []builderCase{
		{name: "verdict", ff: &flow.FlowFilter{Verdict: []flow.Verdict{flow.Verdict_FORWARDED, flow.Verdict_DROPPED}}, f: f, want: true},
		{name: "other verdict", ff: &flow.FlowFilter{Verdict: []flow.Verdict{flow.Verdict_FORWARDED}}, f: f, want: false},
		{name: "drop reason", ff: &flow.FlowFilter{DropReasonDesc: []flow.DropReason{flow.DropReason_POLICY_DENIED}}, f: f, want: true},
		{name: "both, one fails", ff: &flow.FlowFilter{Verdict: []flow.Verdict{flow.Verdict_DROPPED},
			DropReasonDesc: []flow.DropReason{flow.DropReason_POLICY_DENY}}, f: f, want: false},
	})
}
