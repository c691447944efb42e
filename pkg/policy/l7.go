package policy

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/identity"
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

// Matches says whether the rule allows a query for name.
func (r DNSRule) Matches(name string) bool { return r.Matcher()(name) }

// Matcher is Matches with the rule parsed once. A rule that does not
// parse (validation refuses it before it gets here) matches nothing.
func (r DNSRule) Matcher() func(string) bool {
	if r.MatchName != "" {
		n, err := fqdn.ParseName(r.MatchName)
		if err != nil {
			return func(string) bool { return false }
		}
		return n.Matches
	}
	p, err := fqdn.ParsePattern(r.MatchPattern)
	if err != nil {
		return func(string) bool { return false }
	}
	return p.Matches
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

// L7Port is a port of an endpoint (in a direction) that allows with
// layer-7 rules send to the proxy, and every allow of that port, which
// the proxy judges each request by: one with layer-7 rules allows what
// they allow, one without allows everything (and is still shown).
type L7Port struct {
	Direction spec.Direction `json:"direction"`
	Protocol  uint8          `json:"protocol"`
	Port      uint16         `json:"port"`
	Allows    []L7Allow      `json:"allows"`
}

// L7Allow is one allow of an L7Port: the remote identities it applies to
// (every one with Wildcard), and its layer-7 rules (nil: none).
type L7Allow struct {
	Wildcard   bool                       `json:"wildcard,omitempty"`
	Identities []identity.NumericIdentity `json:"identities,omitempty"`
	L7         *L7Rules                   `json:"l7,omitempty"`
}

// Applies says whether the allow applies to the remote identity.
func (a *L7Allow) Applies(remote identity.NumericIdentity) bool {
	return a.Wildcard || slices.Contains(a.Identities, remote)
}

type l7PortKey struct {
	dir   spec.Direction
	proto uint8
	port  uint16
}

// l7Ports are ep's ports that go through the proxy, with their allows.
func (e *Engine) l7Ports(ep *epState) []L7Port {
	own := ep.info.NamedPorts
	portsFor := func(f *filter) NamedPorts {
		if f.dir == spec.Egress {
			return e.peerPorts(identity.Unknown)
		}
		return own
	}
	redirected := map[l7PortKey]bool{}
	origins := slices.SortedFunc(maps.Keys(ep.filters), compareOrigins)
	for _, o := range origins {
		for _, f := range ep.filters[o] {
			if f.proxyPort == 0 {
				continue
			}
			for _, l := range f.port.resolve(portsFor(f)) {
				redirected[l7PortKey{f.dir, l.proto, l.port}] = true
			}
		}
	}
	var out []L7Port
	for _, k := range slices.SortedFunc(maps.Keys(redirected), func(a, b l7PortKey) int {
		return cmp.Or(cmp.Compare(a.dir, b.dir), cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port))
	}) {
		lp := L7Port{Direction: k.dir, Protocol: k.proto, Port: k.port}
		for _, o := range origins {
			for _, f := range ep.filters[o] {
				if f.deny || f.dir != k.dir || !slices.ContainsFunc(f.port.resolve(portsFor(f)), func(l l4) bool { return l.covers(k.proto, k.port) }) {
					continue
				}
				a := L7Allow{L7: f.l7}
				if _, ok := f.sel.(Wildcard); ok {
					a.Wildcard = true
				} else {
					a.Identities = slices.Sorted(maps.Keys(f.cached.ids))
				}
				lp.Allows = append(lp.Allows, a)
			}
		}
		out = append(out, lp)
	}
	return out
}
