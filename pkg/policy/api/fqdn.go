package api

import "github.com/cilium-go/cilium/pkg/fqdn"

// MaxFQDNLength bounds a matchName or matchPattern: a DNS name has at most
// 255 characters.
const MaxFQDNLength = fqdn.MaxLength

// FQDNSelector matches DNS names: exactly one of a name (MatchName) or a
// pattern with wildcards (MatchPattern), with pkg/fqdn's semantics. In
// toFQDNs it selects the addresses that allowed DNS answers gave for the
// names it matches.
type FQDNSelector struct {
	MatchName    string `json:"matchName,omitempty"`
	MatchPattern string `json:"matchPattern,omitempty"`
}

// PortRuleDNS is one entry of rules.dns: the DNS queries the proxy allows,
// by the names they ask for, matched as an FQDNSelector matches them.
type PortRuleDNS FQDNSelector
