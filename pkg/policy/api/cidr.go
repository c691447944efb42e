package api

// CIDR is an IPv4 or IPv6 prefix ("10.0.0.0/8") or a single address.
type CIDR string

// CIDRRule selects one of: a prefix (Cidr); the prefixes of the
// CiliumCIDRGroup named CIDRGroupRef; or those of every CiliumCIDRGroup
// whose labels CIDRGroupSelector matches. The prefixes in ExceptCIDRs are
// left out of what it selects.
type CIDRRule struct {
	Cidr              CIDR              `json:"cidr,omitempty"`
	CIDRGroupRef      string            `json:"cidrGroupRef,omitempty"`
	CIDRGroupSelector *EndpointSelector `json:"cidrGroupSelector,omitempty"`
	ExceptCIDRs       []CIDR            `json:"except,omitempty"`
}
