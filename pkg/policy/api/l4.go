package api

import (
	"encoding/json"
)

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
// layer-7 rules.
type PortRule struct {
	Ports []PortProtocol `json:"ports,omitempty"`
	// Rules holds layer-7 rules (http, dns, kafka) verbatim. They are kept so a
	// policy written for Cilium survives a round trip, but they are not enforced
	// yet: Validate reports them.
	Rules *RawRules `json:"rules,omitempty"`
}

// PortDenyRule denies traffic to the listed ports.
type PortDenyRule struct {
	Ports []PortProtocol `json:"ports,omitempty"`
}

// ICMPField is one ICMP type, numeric or by name, of one family.
type ICMPField struct {
	Family string `json:"family,omitempty"`
	Type   string `json:"type"`
}

// ICMPRule allows or denies the listed ICMP types.
type ICMPRule struct {
	Fields []ICMPField `json:"fields,omitempty"`
}

// RawRules is a JSON document kept as-is.
//
// +k8s:deepcopy-gen=true
type RawRules struct {
	Raw json.RawMessage `json:"-"`
}

// MarshalJSON writes the kept document.
func (r RawRules) MarshalJSON() ([]byte, error) {
	if len(r.Raw) == 0 {
		return []byte("null"), nil
	}
	return r.Raw, nil
}

// UnmarshalJSON keeps a copy of the document.
func (r *RawRules) UnmarshalJSON(b []byte) error {
	r.Raw = append(r.Raw[:0], b...)
	return nil
}
