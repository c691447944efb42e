package api

import (
	"encoding/json"
	"slices"

	"github.com/cilium-go/cilium/pkg/l7"
)

// L7Rules are the layer-7 rules of a toPorts entry, of one protocol at most:
// the requests on its ports that the proxy allows. Without any (rules: {}, or
// empty lists) the entry allows its ports whole, as in Cilium.
//
// Kafka, L7Proto and L7 are the rules of the parsers Cilium 1.20 removed
// (Kafka, and Envoy's Go extensions). They are decoded so that a policy
// written for an older release is refused by name: left out of the schema,
// the API server would prune them into rules that allow more.
type L7Rules struct {
	HTTP []PortRuleHTTP `json:"http,omitempty"`
	DNS  []PortRuleDNS  `json:"dns,omitempty"`

	Kafka   []json.RawMessage   `json:"kafka,omitempty"`
	L7Proto string              `json:"l7proto,omitempty"`
	L7      []map[string]string `json:"l7,omitempty"`
}

// PortRuleHTTP is one entry of rules.http: a request matches it when it
// matches every field given (pkg/l7 has the semantics).
type PortRuleHTTP struct {
	// Path, Method and Host are regular expressions the whole request
	// target, method and Host header must match.
	Path   string `json:"path,omitempty"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host,omitempty"`
	// Headers are names of headers that must be present, or "Name: value"
	// for a header that must have that value.
	Headers       []string      `json:"headers,omitempty"`
	HeaderMatches []HeaderMatch `json:"headerMatches,omitempty"`
}

// HeaderMatch requires a header to have a value; Mismatch says what a
// request without it gets instead of being denied. Secret, the value taken
// from a Kubernetes Secret, is refused: this agent reads no Secrets.
type HeaderMatch struct {
	Mismatch MismatchAction `json:"mismatch,omitempty"`
	Name     string         `json:"name"`
	Secret   *Secret        `json:"secret,omitempty"`
	Value    string         `json:"value,omitempty"`
}

// MismatchAction is what a request whose header does not match gets: one
// of MismatchActions, pkg/l7's names; empty denies it.
type MismatchAction string

// MismatchActions lists the mismatch actions a headerMatch may name.
var MismatchActions = []MismatchAction{
	MismatchAction(l7.MismatchLog), MismatchAction(l7.MismatchAdd),
	MismatchAction(l7.MismatchDelete), MismatchAction(l7.MismatchReplace),
}

// HTTPRule is the rule as pkg/l7 compiles it. A Secret is left out:
// validation refuses it.
func (h *PortRuleHTTP) HTTPRule() l7.HTTPRule {
	out := l7.HTTPRule{Method: h.Method, Path: h.Path, Host: h.Host, Headers: slices.Clone(h.Headers)}
	for _, m := range h.HeaderMatches {
		out.HeaderMatches = append(out.HeaderMatches, l7.HeaderMatch{Name: m.Name, Value: m.Value, Mismatch: l7.MismatchAction(m.Mismatch)})
	}
	return out
}

// Secret names a Kubernetes Secret; an empty Namespace is the policy's.
type Secret struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// TLSContext is where the proxy finds certificates to terminate or
// originate TLS: a Secret and the names of its items.
type TLSContext struct {
	Secret      *Secret `json:"secret"`
	TrustedCA   string  `json:"trustedCA,omitempty"`
	Certificate string  `json:"certificate,omitempty"`
	PrivateKey  string  `json:"privateKey,omitempty"`
}

// Listener names an Envoy listener of a CiliumEnvoyConfig (or its
// clusterwide kind) that the traffic is redirected to.
type Listener struct {
	EnvoyConfig *EnvoyConfig `json:"envoyConfig"`
	Name        string       `json:"name"`
	Priority    uint8        `json:"priority,omitempty"`
}

// EnvoyConfig names a CiliumEnvoyConfig or CiliumClusterwideEnvoyConfig.
type EnvoyConfig struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name"`
}
