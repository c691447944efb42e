package filters

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// The filters of this file are on what cilium-go's flows carry only when
// another part sets it (L7 records, DNS names, clusters, node labels,
// tracing, encryption, translated addresses). They take Hubble's syntax
// and meaning, so that a flow without the field matches none of them, as
// in Cilium: `hubble observe --http-status 200` answers, with no flow.

// httpStatus matches HTTP response codes: "404", or a prefix "4+" / "40+".
var (
	httpStatusFull   = regexp.MustCompile(`^[1-5][0-9]{2}$`)
	httpStatusPrefix = regexp.MustCompile(`^[1-5][0-9]?\+$`)
)

func httpStatus(values []string) (Func, error) {
	var full, prefix []string
	for _, v := range values {
		switch {
		case httpStatusFull.MatchString(v):
			full = append(full, v)
		case httpStatusPrefix.MatchString(v):
			prefix = append(prefix, strings.TrimSuffix(v, "+"))
		default:
			return nil, fmt.Errorf("http_status_code %q: want a code (404) or a prefix (4+, 40+)", v)
		}
	}
	return func(f *flow.Flow) bool {
		code := f.GetL7().GetHttp().GetCode()
		if code == 0 {
			return false
		}
		s := fmt.Sprintf("%03d", code)
		return slices.Contains(full, s) || slices.ContainsFunc(prefix, func(p string) bool { return strings.HasPrefix(s, p) })
	}, nil
}

func httpMethod(values []string) Func {
	return func(f *flow.Flow) bool {
		m := f.GetL7().GetHttp().GetMethod()
		return m != "" && slices.ContainsFunc(values, func(v string) bool { return strings.EqualFold(v, m) })
	}
}

// regexps compiles a field's regular expressions.
func regexps(field string, values []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, v := range values {
		re, err := regexp.Compile(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", field, v, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func anyMatches(res []*regexp.Regexp, s string) bool {
	return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(s) })
}

func httpURL(values []string) (Func, error) {
	res, err := regexps("http_url", values)
	if err != nil {
		return nil, err
	}
	return func(f *flow.Flow) bool {
		h := f.GetL7().GetHttp()
		return h != nil && anyMatches(res, h.GetUrl())
	}, nil
}

func httpPath(values []string) (Func, error) {
	res, err := regexps("http_path", values)
	if err != nil {
		return nil, err
	}
	return func(f *flow.Flow) bool {
		h := f.GetL7().GetHttp()
		if h == nil {
			return false
		}
		u, err := url.ParseRequestURI(h.GetUrl())
		return err == nil && anyMatches(res, u.Path)
	}, nil
}

func httpHeader(values []*flow.HTTPHeader) Func {
	return func(f *flow.Flow) bool {
		return slices.ContainsFunc(f.GetL7().GetHttp().GetHeaders(), func(have *flow.HTTPHeader) bool {
			return slices.ContainsFunc(values, func(want *flow.HTTPHeader) bool {
				return want.GetKey() == have.GetKey() && want.GetValue() == have.GetValue()
			})
		})
	}
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

// fqdn matches DNS names against patterns where * stands for any run of
// name characters, case-insensitive, a trailing dot ignored.
func fqdn(field string, patterns []string, get func(*flow.Flow) []string) (Func, error) {
	var alts []string
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
		if p == "" {
			return nil, fmt.Errorf("%s: an empty pattern", field)
		}
		var b strings.Builder
		for _, r := range p {
			switch {
			case r == '*':
				b.WriteString(`[-.0-9a-z_]*`)
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
	return func(f *flow.Flow) bool {
		return slices.ContainsFunc(get(f), func(n string) bool { return re.MatchString(strings.ToLower(strings.TrimSuffix(n, "."))) })
	}, nil
}

func clusterName(field string, names []string, get func(*flow.Flow) string) (Func, error) {
	if slices.Contains(names, "") {
		return nil, fmt.Errorf("%s: an empty name", field)
	}
	return func(f *flow.Flow) bool { return slices.Contains(names, get(f)) }, nil
}

func nodeLabels(values []string) (Func, error) {
	var sels []selector
	for _, v := range values {
		sel, err := parseSelector(v)
		if err != nil {
			return nil, fmt.Errorf("node_labels %q: %w", v, err)
		}
		sels = append(sels, sel)
	}
	return func(f *flow.Flow) bool {
		ls := f.GetNodeLabels()
		return len(ls) > 0 && slices.ContainsFunc(sels, func(s selector) bool { return s.matches(ls) })
	}, nil
}

// l7Filters are the filters of this file that ff sets.
func l7Filters(ff *flow.FlowFilter) ([]Func, error) {
	var out []Func
	add := func(f Func, err error) error {
		if err == nil {
			out = append(out, f)
		}
		return err
	}
	var errs []error
	if v := ff.GetHttpStatusCode(); len(v) > 0 {
		errs = append(errs, add(httpStatus(v)))
	}
	if v := ff.GetHttpMethod(); len(v) > 0 {
		errs = append(errs, add(httpMethod(v), nil))
	}
	if v := ff.GetHttpUrl(); len(v) > 0 {
		errs = append(errs, add(httpURL(v)))
	}
	if v := ff.GetHttpPath(); len(v) > 0 {
		errs = append(errs, add(httpPath(v)))
	}
	if v := ff.GetHttpHeader(); len(v) > 0 {
		errs = append(errs, add(httpHeader(v), nil))
	}
	if v := ff.GetDnsQuery(); len(v) > 0 {
		errs = append(errs, add(dnsQuery(v)))
	}
	if v := ff.GetSourceFqdn(); len(v) > 0 {
		errs = append(errs, add(fqdn("source_fqdn", v, func(f *flow.Flow) []string { return f.GetSourceNames() })))
	}
	if v := ff.GetDestinationFqdn(); len(v) > 0 {
		errs = append(errs, add(fqdn("destination_fqdn", v, func(f *flow.Flow) []string { return f.GetDestinationNames() })))
	}
	if v := ff.GetSourceClusterName(); len(v) > 0 {
		errs = append(errs, add(clusterName("source_cluster_name", v, func(f *flow.Flow) string { return f.GetSource().GetClusterName() })))
	}
	if v := ff.GetDestinationClusterName(); len(v) > 0 {
		errs = append(errs, add(clusterName("destination_cluster_name", v, func(f *flow.Flow) string { return f.GetDestination().GetClusterName() })))
	}
	if v := ff.GetNodeLabels(); len(v) > 0 {
		errs = append(errs, add(nodeLabels(v)))
	}
	if v := ff.GetTraceId(); len(v) > 0 {
		out = append(out, func(f *flow.Flow) bool { return slices.Contains(v, f.GetTraceContext().GetParent().GetTraceId()) })
	}
	if v := ff.GetIpTraceId(); len(v) > 0 {
		out = append(out, func(f *flow.Flow) bool { return slices.Contains(v, f.GetIpTraceId().GetTraceId()) })
	}
	if v := ff.GetEncrypted(); len(v) > 0 {
		out = append(out, func(f *flow.Flow) bool { return f.GetIP() != nil && slices.Contains(v, f.GetIP().GetEncrypted()) })
	}
	if v := ff.GetSourceIpXlated(); len(v) > 0 {
		m, err := ipMatcher("source_ip_xlated", v)
		errs = append(errs, add(func(f *flow.Flow) bool { return m(f.GetIP().GetSourceXlated()) }, err))
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
