package api

import "k8s.io/apimachinery/pkg/util/intstr"

// L4Proto is a transport protocol name.
type L4Proto string

// Protocols accepted in toPorts.
const (
	ProtoTCP  L4Proto = "TCP"
	ProtoUDP  L4Proto = "UDP"
	ProtoSCTP L4Proto = "SCTP"
	ProtoICMP L4Proto = "ICMP"
	ProtoAny  L4Proto = "ANY"
)

// Protocols lists every protocol toPorts accepts.
var Protocols = []L4Proto{ProtoTCP, ProtoUDP, ProtoSCTP, ProtoAny}

// PortProtocol is a port (a number, or a named container port) or a port
// range [Port, EndPort], and a protocol (empty means ANY).
type PortProtocol struct {
	Port     string  `json:"port,omitempty"`
	EndPort  int32   `json:"endPort,omitempty"`
	Protocol L4Proto `json:"protocol,omitempty"`
}

// PortRule allows traffic to the listed ports, optionally restricted further by
// layer-7 rules. ServerNames, TerminatingTLS, OriginatingTLS and Listener are
// Cilium's TLS and Envoy fields: decoded so that a policy using them is refused
// by name (Validate) rather than enforced without them.
type PortRule struct {
	Ports          []PortProtocol `json:"ports,omitempty"`
	TerminatingTLS *TLSContext    `json:"terminatingTLS,omitempty"`
	OriginatingTLS *TLSContext    `json:"originatingTLS,omitempty"`
	ServerNames    []string       `json:"serverNames,omitempty"`
	Listener       *Listener      `json:"listener,omitempty"`
	Rules          *L7Rules       `json:"rules,omitempty"`
}

// PortDenyRule denies traffic to the listed ports.
type PortDenyRule struct {
	Ports []PortProtocol `json:"ports,omitempty"`
}

// ICMPFamily is the IP family of an ICMP field: ICMP for IPv4, ICMPv6
// for IPv6.
type ICMPFamily string

// ICMP families; empty means IPv4.
const (
	ICMPFamilyIPv4 ICMPFamily = "IPv4"
	ICMPFamilyIPv6 ICMPFamily = "IPv6"
)

// ICMPFamilies lists the families an ICMP field may name.
var ICMPFamilies = []ICMPFamily{ICMPFamilyIPv4, ICMPFamilyIPv6}

// ICMPField is one ICMP type of one family. Type is a number from 0 to
// 255 (in YAML either 8 or "8") or the type's name in that family
// (EchoRequest is 8 for IPv4 and 128 for IPv6).
type ICMPField struct {
	Family ICMPFamily         `json:"family,omitempty"`
	Type   intstr.IntOrString `json:"type"`
}

// ICMPRule allows or denies the listed ICMP types.
type ICMPRule struct {
	Fields []ICMPField `json:"fields,omitempty"`
}
