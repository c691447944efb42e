package api

// CIDR is an IPv4 or IPv6 prefix ("10.0.0.0/8") or a single address.
type CIDR string

// CIDRRule selects a prefix, minus the prefixes in ExceptCIDRs; or a set of
// prefixes through a CiliumCIDRGroup.
type CIDRRule struct {
	Cidr         CIDR   `json:"cidr,omitempty"`
	CIDRGroupRef string `json:"cidrGroupRef,omitempty"`
	ExceptCIDRs  []CIDR `json:"except,omitempty"`
}
