package filters

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// protocolOf says whether a flow is of a protocol, by Hubble's names:
// L4 (icmp is either ICMP) and L7 (a DNS or HTTP record).
var protocolOf = map[string]func(*flow.Flow) bool{
	"tcp":    func(f *flow.Flow) bool { return f.GetL4().GetTCP() != nil },
	"udp":    func(f *flow.Flow) bool { return f.GetL4().GetUDP() != nil },
	"sctp":   func(f *flow.Flow) bool { return f.GetL4().GetSCTP() != nil },
	"icmpv4": func(f *flow.Flow) bool { return f.GetL4().GetICMPv4() != nil },
	"icmpv6": func(f *flow.Flow) bool { return f.GetL4().GetICMPv6() != nil },
	"icmp":   func(f *flow.Flow) bool { return f.GetL4().GetICMPv4() != nil || f.GetL4().GetICMPv6() != nil },
	"vrrp":   func(f *flow.Flow) bool { return f.GetL4().GetVRRP() != nil },
	"igmp":   func(f *flow.Flow) bool { return f.GetL4().GetIGMP() != nil },
	"dns":    func(f *flow.Flow) bool { return f.GetL7().GetDns() != nil },
	"http":   func(f *flow.Flow) bool { return f.GetL7().GetHttp() != nil },
}

// protocolFilter: protocol, by Hubble's names.
func protocolFilter(ff *flow.FlowFilter) ([]Func, error) { return when(ff.GetProtocol(), protocol) }

func protocol(values []string) (Func, error) {
	var ms []func(*flow.Flow) bool
	for _, v := range values {
		m, ok := protocolOf[strings.ToLower(v)]
		if !ok {
			return nil, fmt.Errorf("protocol %q: want tcp, udp, sctp, icmp, icmpv4, icmpv6, vrrp, igmp, dns or http", v)
		}
		ms = append(ms, m)
	}
	return func(f *flow.Flow) bool {
		return slices.ContainsFunc(ms, func(m func(*flow.Flow) bool) bool { return m(f) })
	}, nil
}
