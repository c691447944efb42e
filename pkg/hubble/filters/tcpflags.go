package filters

import (
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// tcpFlagsFilter: a TCP flow with every flag of one of the sets.
func tcpFlagsFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetTcpFlags(), func(v []*flow.TCPFlags) Func {
		return func(f *flow.Flow) bool {
			have := f.GetL4().GetTCP().GetFlags()
			return have != nil && slices.ContainsFunc(v, func(want *flow.TCPFlags) bool { return hasFlags(have, want) })
		}
	})
}

// hasFlags: every flag that want sets is set in have.
func hasFlags(have, want *flow.TCPFlags) bool {
	return (!want.GetFIN() || have.GetFIN()) && (!want.GetSYN() || have.GetSYN()) && (!want.GetRST() || have.GetRST()) &&
		(!want.GetPSH() || have.GetPSH()) && (!want.GetACK() || have.GetACK()) && (!want.GetURG() || have.GetURG()) &&
		(!want.GetECE() || have.GetECE()) && (!want.GetCWR() || have.GetCWR()) && (!want.GetNS() || have.GetNS())
}
