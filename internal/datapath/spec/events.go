package spec

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium-go/cilium/pkg/identity"
)

// The numbers below are bpf/lib/common.h's enums, which are Cilium's
// monitor numbers; they are written out here because this package sees no
// generated code. internal/datapath checks at compile time that they agree
// with the enums bpf2go generates.

// EventType says what an Event records. The numbers are Cilium's monitor
// message types.
type EventType uint8

const (
	EventDrop          EventType = 1
	EventTrace         EventType = 4
	EventPolicyVerdict EventType = 5
	// EventTraceSock: socket-level balancing saw a connect or send to a
	// frontend (Xlate says before or after it translated it).
	EventTraceSock EventType = 7
)

func (t EventType) String() string {
	switch t {
	case EventDrop:
		return "drop"
	case EventTrace:
		return "trace"
	case EventPolicyVerdict:
		return "policy-verdict"
	case EventTraceSock:
		return "trace-sock"
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// TracePoint is where a trace event was observed (Cilium's numbers).
type TracePoint uint8

const (
	TraceToLXC       TracePoint = 0
	TraceToProxy     TracePoint = 1
	TraceToHost      TracePoint = 2
	TraceToStack     TracePoint = 3
	TraceToOverlay   TracePoint = 4
	TraceFromLXC     TracePoint = 5
	TraceFromHost    TracePoint = 7
	TraceFromOverlay TracePoint = 9
	TraceFromNetwork TracePoint = 10
)

var tracePointNames = map[TracePoint]string{
	TraceToLXC:       "to-endpoint",
	TraceToProxy:     "to-proxy",
	TraceToHost:      "to-host",
	TraceToStack:     "to-stack",
	TraceToOverlay:   "to-overlay",
	TraceFromLXC:     "from-endpoint",
	TraceFromHost:    "from-host",
	TraceFromOverlay: "from-overlay",
	TraceFromNetwork: "from-network",
}

func (p TracePoint) String() string {
	if s, ok := tracePointNames[p]; ok {
		return s
	}
	return fmt.Sprintf("point(%d)", uint8(p))
}

// SockXlatePoint is where socket-level balancing saw a call (Cilium's
// numbers).
type SockXlatePoint uint8

const (
	// SockPreForward: the call as made, to the frontend.
	SockPreForward SockXlatePoint = 1
	// SockPostForward: the call as translated, to the backend.
	SockPostForward SockXlatePoint = 2
)

func (x SockXlatePoint) String() string {
	switch x {
	case SockPreForward:
		return "pre-xlate-fwd"
	case SockPostForward:
		return "post-xlate-fwd"
	}
	return fmt.Sprintf("xlate(%d)", uint8(x))
}

// CTStatus is the connection tracking result for a packet.
type CTStatus uint8

const (
	CTNew         CTStatus = 0
	CTEstablished CTStatus = 1
	CTReply       CTStatus = 2
	CTRelated     CTStatus = 3
	// CTInvalid: a TCP segment that is no SYN, of no tracked connection.
	CTInvalid CTStatus = 4
)

func (c CTStatus) String() string {
	switch c {
	case CTNew:
		return "new"
	case CTEstablished:
		return "established"
	case CTReply:
		return "reply"
	case CTRelated:
		return "related"
	case CTInvalid:
		return "invalid"
	}
	return fmt.Sprintf("ct(%d)", uint8(c))
}

// Verdict of a policy lookup.
type Verdict uint8

const (
	VerdictAllow Verdict = 1
	VerdictDeny  Verdict = 2
	// VerdictRedirect: allowed through the node's layer-7 proxy.
	VerdictRedirect Verdict = 3
)

func (v Verdict) String() string {
	switch v {
	case VerdictAllow:
		return "allowed"
	case VerdictDeny:
		return "denied"
	case VerdictRedirect:
		return "redirected"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Event is one record of the datapath's event ring buffer, decoded.
type Event struct {
	Type EventType
	// Reason is set on drops and on denied policy verdicts.
	Reason Reason
	// Point is set on traces.
	Point TracePoint
	// Xlate is set on socket traces.
	Xlate       SockXlatePoint
	Verdict     Verdict
	Direction   Direction
	CT          CTStatus
	Src, Dst    netip.Addr
	SrcPort     uint16 // ICMP echo: the id on requests
	DstPort     uint16 // ICMP echo: the id on replies
	Protocol    uint8
	TCPFlags    uint8
	SrcIdentity identity.NumericIdentity
	DstIdentity identity.NumericIdentity
	// SrcEndpoint and DstEndpoint are local endpoint ids, 0 if none.
	SrcEndpoint uint16
	DstEndpoint uint16
	Ifindex     uint32
	Length      uint32
	// Monotonic is the kernel's CLOCK_MONOTONIC at the event.
	Monotonic time.Duration
	// PolicyCookie, on a policy verdict and the drop a deny causes, is
	// the deciding policy entry's cookie (0: no entry matched).
	PolicyCookie uint32
	// RevNAT is the reverse NAT index of the service that translated
	// the packet's connection (0: none): the frontend's.
	RevNAT uint16
	// NetNSCookie, on socket traces, is the network namespace of the
	// calling process (its cookie, SO_NETNS_COOKIE).
	NetNSCookie uint64
}

// Reason is why a packet was dropped, or Forwarded. The numbers are
// Cilium's drop reasons so that Hubble can report them unchanged.
type Reason uint8

const (
	Forwarded           Reason = 0
	DropInvalidSource   Reason = 132
	DropPolicy          Reason = 133
	DropInvalid         Reason = 134
	DropUnsupportedL3   Reason = 139
	DropNoTunnelKey     Reason = 147
	DropCTCreate        Reason = 155
	DropFragNoSupport   Reason = 157
	DropNoService       Reason = 158
	DropUnknownCT       Reason = 163
	DropNATNoMapping    Reason = 167
	DropInvalidIdentity Reason = 171
	DropUnknownSender   Reason = 172
	DropFragNotFound    Reason = 175
	// DropNotInSourceRange: a client outside a frontend's
	// loadBalancerSourceRanges (Hubble's DENIED_BY_LB_SRC_RANGE_CHECK).
	DropNotInSourceRange Reason = 177
	// DropProxyLookupFailed: a connection for the layer-7 proxy, which
	// has no socket open; DropProxySetFailed: the kernel refused the
	// proxy's socket; DropProxyUnknownProto: neither TCP nor UDP.
	DropProxyLookupFailed Reason = 178
	DropProxySetFailed    Reason = 179
	DropProxyUnknownProto Reason = 180
	DropPolicyDeny        Reason = 181
)

// reasonNames are Cilium's texts for its reason codes (what its monitor
// prints and its drop metrics carry as the reason label), so that
// dashboards and cilium-cli's drop checks read ours unchanged.
var reasonNames = map[Reason]string{
	Forwarded:             "Success",
	DropUnsupportedL3:     "Unsupported L3 protocol",
	DropInvalidSource:     "Invalid source ip",
	DropPolicy:            "Policy denied",
	DropInvalid:           "Invalid packet",
	DropCTCreate:          "CT: Map insertion failed",
	DropNoTunnelKey:       "Error retrieving tunnel key",
	DropFragNoSupport:     "IP fragmentation not supported",
	DropNoService:         "Service backend not found",
	DropNATNoMapping:      "No mapping for NAT masquerade",
	DropUnknownCT:         "Unknown connection tracking state",
	DropInvalidIdentity:   "Invalid identity",
	DropUnknownSender:     "Unknown sender",
	DropFragNotFound:      "First logical datagram fragment not found",
	DropNotInSourceRange:  "Denied by LB src range check",
	DropProxyLookupFailed: "Socket lookup failed",
	DropProxySetFailed:    "Socket assign failed",
	DropProxyUnknownProto: "Proxy redirection not supported for protocol",
	DropPolicyDeny:        "Policy denied by denylist",
}

func (r Reason) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}
