package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Verdicts of rules and entries.
const (
	VerdictAllow = "allow"
	VerdictDeny  = "deny"
)

// PolicyOrigin names the object a rule came from.
type PolicyOrigin struct {
	// Kind is NetworkPolicy, CiliumNetworkPolicy,
	// CiliumClusterwideNetworkPolicy, or builtin for the agent's own.
	Kind string `json:"kind"`
	// Namespace is empty for cluster-wide kinds.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is kind/namespace/name, or kind/name without a namespace.
func (o PolicyOrigin) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// Policy is GET /v1/policy, in the shape of Cilium's: the rules the
// engine holds, as the JSON text of a list of PolicyRule, and the agent's
// policy revision, which counts the changes of its policies from 1.
type Policy struct {
	Policy   string `json:"policy"`
	Revision uint64 `json:"revision"`
}

// Rules decodes the policy's rules.
func (p Policy) Rules() ([]PolicyRule, error) {
	var out []PolicyRule
	if err := json.Unmarshal([]byte(p.Policy), &out); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return out, nil
}

// PolicyRule is one direction of one rule the policy engine holds (GET
// /v1/policy).
type PolicyRule struct {
	Origin PolicyOrigin `json:"origin"`
	// Subject is the selector of the endpoints the rule applies to.
	Subject   string `json:"subject"`
	Direction string `json:"direction"` // ingress or egress
	Verdict   string `json:"verdict"`   // allow or deny
	// DefaultDeny: the rule isolates its subjects in Direction, so that
	// what no rule allows is dropped.
	DefaultDeny bool `json:"defaultDeny"`
	// Peers are the selectors of the remote identities; none: the rule
	// covers no peer (it may still isolate).
	Peers []string `json:"peers"`
	// Ports are protocol/port; none: every protocol and port.
	Ports []string `json:"ports"`
}

// PolicySelector is one selector of the selector cache (GET
// /v1/policy/selectors).
type PolicySelector struct {
	Selector   string                     `json:"selector"`
	Identities []identity.NumericIdentity `json:"identities"`
	// Users counts the endpoints' filters that use the selector.
	Users int `json:"users"`
}

// EndpointPolicy is an endpoint's policy as the engine computed it and
// as far as the datapath realized it.
type EndpointPolicy struct {
	// Identity is the one the policy was computed for.
	Identity identity.NumericIdentity `json:"identity"`
	// Revision is the engine's revision the entries are of; Realized the
	// revision the datapath holds, 0 while none (or a newer one is on its
	// way).
	Revision uint64 `json:"revision"`
	Realized uint64 `json:"realized"`
	// PolicyRevision is the agent's policy revision (Policy.Revision)
	// that the datapath enforces for the endpoint; 0 while its entries
	// are on their way.
	PolicyRevision uint64 `json:"policyRevision"`
	// Ready: the identity's labels are known and the entries computed.
	Ready          bool `json:"ready"`
	EnforceIngress bool `json:"enforceIngress"`
	EnforceEgress  bool `json:"enforceEgress"`
	// Error is why the datapath failed to realize Revision.
	Error string `json:"error,omitempty"`
	// Refused names the policy the endpoint's policy map has no room for
	// (--bpf-policy-map-max): the entries are those of its policy before.
	Refused string        `json:"refused,omitempty"`
	Entries []PolicyEntry `json:"entries"`
}

// PolicyEntry is one entry of an endpoint's policy map, with the rules
// it came from.
type PolicyEntry struct {
	Direction string `json:"direction"`
	// Identity 0 is any identity; Protocol 0 any protocol; Port 0 any
	// port (the type for ICMP); EndPort is set for a range.
	Identity  identity.NumericIdentity `json:"identity"`
	Protocol  uint8                    `json:"protocol"`
	Port      uint16                   `json:"port"`
	EndPort   uint16                   `json:"endPort,omitempty"`
	Verdict   string                   `json:"verdict"`
	ProxyPort uint16                   `json:"proxyPort,omitempty"`
	Origins   []PolicyOrigin           `json:"origins"`
}

// PolicyTrace is GET /v1/policy/trace: the verdict on a new connection
// from a source to a destination.
type PolicyTrace struct {
	Source      TracePeer `json:"source"`
	Destination TracePeer `json:"destination"`
	// Protocol is tcp, udp, sctp or icmp; Port the ICMP type for icmp.
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
	// Egress is the source's verdict, Ingress the destination's.
	Egress  PolicyVerdict `json:"egress"`
	Ingress PolicyVerdict `json:"ingress"`
	// Allowed: both allow it.
	Allowed bool `json:"allowed"`
}

// TracePeer is one side of a traced connection.
type TracePeer struct {
	// Identity is 0 for labels that no identity has yet.
	Identity identity.NumericIdentity `json:"identity"`
	Labels   []string                 `json:"labels"`
}

// PolicyVerdict is one direction's verdict and the rules that made it.
type PolicyVerdict struct {
	Allowed bool `json:"allowed"`
	// Enforced: the endpoint is isolated in this direction.
	Enforced bool `json:"enforced"`
	// DecidedBy are the origins of the rules that decided: the denies
	// that matched, else the allows; none when nothing matched and the
	// connection is dropped by default.
	DecidedBy []PolicyOrigin `json:"decidedBy"`
}

// TraceProtocols are the protocols GET /v1/policy/trace takes, by name.
var TraceProtocols = map[string]uint8{"tcp": spec.ProtoTCP, "udp": spec.ProtoUDP, "sctp": spec.ProtoSCTP, "icmp": spec.ProtoICMP}

// ParseTracePort parses the destination port of a trace to protocol
// proto: 1 to 65535, or the type (0 to 255) for ICMP. With proto 0 (not
// known) it checks only that s is a number that fits a port.
func ParseTracePort(proto uint8, s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("required")
	}
	lo, hi, what := uint64(1), uint64(65535), "a port from 1 to 65535"
	switch proto {
	case spec.ProtoICMP:
		lo, hi, what = 0, 255, "an ICMP type from 0 to 255"
	case 0:
		lo, what = 0, "a port"
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q is not %s", s, what)
	}
	return uint16(n), nil
}
