package policy

import (
	"encoding/json"
	"slices"

	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/l7"
)

// L7Parser names the proxy that judges the connections of a rule with
// layer-7 rules.
type L7Parser uint8

const (
	ParserNone L7Parser = iota
	ParserHTTP
	ParserDNS
)

func (p L7Parser) String() string {
	switch p {
	case ParserHTTP:
		return "http"
	case ParserDNS:
		return "dns"
	}
	return "none"
}

// DNSRule is one entry of rules.dns: exactly one of MatchName and
// MatchPattern, with pkg/fqdn's semantics.
type DNSRule struct {
	MatchName    string `json:"matchName,omitempty"`
	MatchPattern string `json:"matchPattern,omitempty"`
}

// Matches says whether the rule allows a query for name. A rule that
// does not parse (validation refuses it before it gets here) allows
// nothing.
func (r DNSRule) Matches(name string) bool {
	if r.MatchName != "" {
		n, err := fqdn.ParseName(r.MatchName)
		return err == nil && n.Matches(name)
	}
	p, err := fqdn.ParsePattern(r.MatchPattern)
	return err == nil && p.Matches(name)
}

// L7Rules are the layer-7 rules of one toPorts entry: the connections it
// allows go through the proxy of Parser, which allows the requests that
// one of the rules allows. A parser without rules allows every request
// and still shows each one (Cilium's visibility).
type L7Rules struct {
	Parser L7Parser      `json:"parser"`
	HTTP   []l7.HTTPRule `json:"http,omitempty"`
	DNS    []DNSRule     `json:"dns,omitempty"`
}

// Key is a canonical form: rules with equal keys allow the same requests.
func (r *L7Rules) Key() string {
	if r == nil {
		return ""
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// Equal says whether a and b are the same rules.
func (r *L7Rules) Equal(o *L7Rules) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Parser == o.Parser && slices.EqualFunc(r.HTTP, o.HTTP, equalHTTP) && slices.Equal(r.DNS, o.DNS)
}

func equalHTTP(a, b l7.HTTPRule) bool {
	return a.Method == b.Method && a.Path == b.Path && a.Host == b.Host &&
		slices.Equal(a.Headers, b.Headers) && slices.Equal(a.HeaderMatches, b.HeaderMatches)
}
