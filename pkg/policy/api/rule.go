package api

import (
	"github.com/cilium-go/cilium/pkg/labels"
)

// Rule is one policy rule: the endpoints it applies to (EndpointSelector, or
// NodeSelector for host policies) and what they may send and receive.
type Rule struct {
	EndpointSelector *EndpointSelector `json:"endpointSelector,omitempty"`
	NodeSelector     *EndpointSelector `json:"nodeSelector,omitempty"`

	Ingress     []IngressRule     `json:"ingress,omitempty"`
	IngressDeny []IngressDenyRule `json:"ingressDeny,omitempty"`
	Egress      []EgressRule      `json:"egress,omitempty"`
	EgressDeny  []EgressDenyRule  `json:"egressDeny,omitempty"`

	Labels            []labels.Label     `json:"labels,omitempty"`
	EnableDefaultDeny *DefaultDenyConfig `json:"enableDefaultDeny,omitempty"`
	Description       string             `json:"description,omitempty"`
	Log               *LogConfig         `json:"log,omitempty"`
}

// Rules is a list of rules (the "specs" field).
type Rules []*Rule

// DefaultDenyConfig says whether selecting an endpoint puts it in default-deny
// for a direction; unset means yes when the rule has rules in that direction.
type DefaultDenyConfig struct {
	Ingress *bool `json:"ingress,omitempty"`
	Egress  *bool `json:"egress,omitempty"`
}

// LogConfig attaches a value to policy verdict events of this rule.
type LogConfig struct {
	Value string `json:"value,omitempty"`
}

// IngressCommonRule is the peer part of an ingress rule, shared by allow and deny.
type IngressCommonRule struct {
	FromEndpoints []EndpointSelector `json:"fromEndpoints,omitempty"`
	FromCIDR      []CIDR             `json:"fromCIDR,omitempty"`
	FromCIDRSet   []CIDRRule         `json:"fromCIDRSet,omitempty"`
	FromEntities  []Entity           `json:"fromEntities,omitempty"`
	FromNodes     []EndpointSelector `json:"fromNodes,omitempty"`
}

// IngressRule allows traffic from the peers to the ports.
type IngressRule struct {
	IngressCommonRule `json:",inline"`
	ToPorts           []PortRule `json:"toPorts,omitempty"`
	ICMPs             []ICMPRule `json:"icmps,omitempty"`
}

// IngressDenyRule denies traffic from the peers to the ports.
type IngressDenyRule struct {
	IngressCommonRule `json:",inline"`
	ToPorts           []PortDenyRule `json:"toPorts,omitempty"`
	ICMPs             []ICMPRule     `json:"icmps,omitempty"`
}

// EgressCommonRule is the peer part of an egress rule, shared by allow and
// deny. ToServices are the backends of Services: the pods a Service's
// selector selects, or the addresses of a Service without one.
type EgressCommonRule struct {
	ToEndpoints []EndpointSelector `json:"toEndpoints,omitempty"`
	ToCIDR      []CIDR             `json:"toCIDR,omitempty"`
	ToCIDRSet   []CIDRRule         `json:"toCIDRSet,omitempty"`
	ToEntities  []Entity           `json:"toEntities,omitempty"`
	ToServices  []Service          `json:"toServices,omitempty"`
	ToNodes     []EndpointSelector `json:"toNodes,omitempty"`
}

// EgressRule allows traffic to the peers and ports.
type EgressRule struct {
	EgressCommonRule `json:",inline"`
	ToPorts          []PortRule     `json:"toPorts,omitempty"`
	ToFQDNs          []FQDNSelector `json:"toFQDNs,omitempty"`
	ICMPs            []ICMPRule     `json:"icmps,omitempty"`
}

// EgressDenyRule denies traffic to the peers and ports.
type EgressDenyRule struct {
	EgressCommonRule `json:",inline"`
	ToPorts          []PortDenyRule `json:"toPorts,omitempty"`
	ICMPs            []ICMPRule     `json:"icmps,omitempty"`
}
