package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// verdictFilters: verdict and drop_reason_desc.
func verdictFilters(ff *flow.FlowFilter) ([]Func, error) {
	verdicts, _ := whenAll(ff.GetVerdict(), func(v []flow.Verdict) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetVerdict()) }
	})
	reasons, _ := whenAll(ff.GetDropReasonDesc(), func(v []flow.DropReason) Func {
		return func(f *flow.Flow) bool { return slices.Contains(v, f.GetDropReasonDesc()) }
	})
	return append(verdicts, reasons...), nil
}
