// Package flows reads what a Hubble flow says at L4, the same way for
// the agent (summaries, filters) and the CLI (its output), which must
// not carry the agent's datapath in it.
package flows

import (
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// Ports are a flow's L4 source and destination ports; ok is false for a
// protocol without ports.
func Ports(f *flow.Flow) (src, dst uint32, ok bool) {
	switch l4 := f.GetL4().GetProtocol().(type) {
	case *flow.Layer4_TCP:
		return l4.TCP.GetSourcePort(), l4.TCP.GetDestinationPort(), true
	case *flow.Layer4_UDP:
		return l4.UDP.GetSourcePort(), l4.UDP.GetDestinationPort(), true
	case *flow.Layer4_SCTP:
		return l4.SCTP.GetSourcePort(), l4.SCTP.GetDestinationPort(), true
	}
	return 0, 0, false
}

// Protocol is tcp, udp, sctp, icmpv4, or empty.
func Protocol(f *flow.Flow) string {
	switch f.GetL4().GetProtocol().(type) {
	case *flow.Layer4_TCP:
		return "tcp"
	case *flow.Layer4_UDP:
		return "udp"
	case *flow.Layer4_SCTP:
		return "sctp"
	case *flow.Layer4_ICMPv4:
		return "icmpv4"
	}
	return ""
}

// Summary is a flow's L4 in a few words, as Hubble's summary line:
// "TCP Flags: SYN, ACK", "UDP", "ICMPv4 EchoRequest".
func Summary(f *flow.Flow) string {
	switch l4 := f.GetL4().GetProtocol().(type) {
	case *flow.Layer4_TCP:
		return "TCP Flags: " + TCPFlags(l4.TCP.GetFlags())
	case *flow.Layer4_UDP:
		return "UDP"
	case *flow.Layer4_SCTP:
		return "SCTP"
	case *flow.Layer4_ICMPv4:
		if l4.ICMPv4.GetType() == 8 {
			return "ICMPv4 EchoRequest"
		}
		return "ICMPv4 EchoReply"
	}
	return "IPv4"
}

// TCPFlags names the flags set, comma-separated, SYN first.
func TCPFlags(fl *flow.TCPFlags) string {
	var on []string
	for _, x := range []struct {
		set  bool
		name string
	}{{fl.GetSYN(), "SYN"}, {fl.GetFIN(), "FIN"}, {fl.GetRST(), "RST"}, {fl.GetPSH(), "PSH"}, {fl.GetACK(), "ACK"},
		{fl.GetURG(), "URG"}, {fl.GetECE(), "ECE"}, {fl.GetCWR(), "CWR"}} {
		if x.set {
			on = append(on, x.name)
		}
	}
	return strings.Join(on, ", ")
}

// Cilium's event types and trace observation points by name, as Hubble's
// --type filter and its metrics name them.
var (
	EventTypes  = map[string]int32{"drop": 1, "trace": 4, "policy-verdict": 5, "trace-sock": 7, "l7": EventTypeL7}
	TracePoints = map[string]int32{"to-endpoint": 0, "to-proxy": 1, "to-host": 2, "to-stack": 3, "to-overlay": 4,
		"from-endpoint": 5, "from-proxy": 6, "from-host": 7, "from-stack": 8, "from-overlay": 9, "from-network": 10, "to-network": 11}
)

// EventTypeL7 is the event type of L7 flows: Cilium's monitor message
// type of the proxies' access log (MessageTypeAccessLog), which
// Hubble's --type l7 asks for.
const EventTypeL7 int32 = 129

// TracePointName is the name of a trace's observation point (its event
// subtype), or empty for a number without one.
func TracePointName(sub int32) string {
	for name, n := range TracePoints {
		if n == sub {
			return name
		}
	}
	return ""
}
