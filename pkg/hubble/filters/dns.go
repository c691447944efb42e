package filters

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// dnsFilters: dns_query (regular expressions on a DNS record's query),
// source_fqdn and destination_fqdn (patterns on the names a side is
// known by: those the endpoint on the other side learned of it through
// the DNS proxy). A DNS record is an L7 flow's, of the DNS proxy; an fqdn
// filter does not match a record's query, as in Cilium.
func dnsFilters(ff *flow.FlowFilter) ([]Func, error) {
	query, err := when(ff.GetDnsQuery(), dnsQuery)
	if err != nil {
		return nil, err
	}
	src, err := when(ff.GetSourceFqdn(), func(v []string) (Func, error) {
		return fqdn("source_fqdn", v, func(f *flow.Flow) []string { return f.GetSourceNames() })
	})
	if err != nil {
		return nil, err
	}
	dst, err := when(ff.GetDestinationFqdn(), func(v []string) (Func, error) {
		return fqdn("destination_fqdn", v, func(f *flow.Flow) []string { return f.GetDestinationNames() })
	})
	if err != nil {
		return nil, err
	}
	return slices.Concat(query, src, dst), nil
}

func dnsQuery(values []string) (Func, error) {
	res, err := regexps("dns_query", values)
	if err != nil {
		return nil, err
	}
	return func(f *flow.Flow) bool {
		d := f.GetL7().GetDns()
		return d != nil && anyMatches(res, d.GetQuery())
	}, nil
}

// fqdn matches a side's names against patterns as Cilium's Hubble does:
// a pattern is lowercased and loses one trailing dot, and its * stands
// for any run of letters, digits, dots and dashes (not underscores). The
// names are matched as flows carry them, lower case without the root's
// dot, the form the parser gives them.
func fqdn(field string, patterns []string, get func(*flow.Flow) []string) (Func, error) {
	var alts []string
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
		switch {
		case p == "":
			return nil, fmt.Errorf("%s: an empty pattern", field)
		case strings.HasSuffix(p, "."):
			return nil, fmt.Errorf("%s %q: more than one trailing dot", field, p)
		}
		var b strings.Builder
		for _, r := range p {
			switch {
			case r == '*':
				b.WriteString(`[-.0-9a-z]*`)
			case r == '.':
				b.WriteString(`\.`)
			case r == '-' || r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z'):
				b.WriteRune(r)
			default:
				return nil, fmt.Errorf("%s %q: %q is not a DNS name character", field, p, r)
			}
		}
		alts = append(alts, b.String())
	}
	re := regexp.MustCompile(`^(?:` + strings.Join(alts, "|") + `)$`)
	return func(f *flow.Flow) bool { return slices.ContainsFunc(get(f), re.MatchString) }, nil
}
