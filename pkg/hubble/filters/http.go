package filters

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
)

// The fields of HTTP records, which only L7 flows (the proxy's records)
// carry: other flows match none of them, as in Cilium.

// httpFilters: http_status_code, http_method, http_url, http_path and
// http_header. As in Cilium, a filter that also asks for event types
// must ask for L7 flows among them: no other type has HTTP fields.
func httpFilters(ff *flow.FlowFilter) ([]Func, error) {
	if types := ff.GetEventType(); len(types) > 0 && hasHTTPField(ff) &&
		!slices.ContainsFunc(types, func(t *flow.EventTypeFilter) bool { return t.GetType() == flows.EventTypeL7 }) {
		return nil, fmt.Errorf("http fields: event_type must ask for L7 flows (type %d) to match any", flows.EventTypeL7)
	}
	var out []Func
	for _, fs := range []func() ([]Func, error){
		func() ([]Func, error) { return when(ff.GetHttpStatusCode(), httpStatus) },
		func() ([]Func, error) { return whenAll(ff.GetHttpMethod(), httpMethod) },
		func() ([]Func, error) { return when(ff.GetHttpUrl(), httpURL) },
		func() ([]Func, error) { return when(ff.GetHttpPath(), httpPath) },
		func() ([]Func, error) { return whenAll(ff.GetHttpHeader(), httpHeader) },
	} {
		f, err := fs()
		if err != nil {
			return nil, err
		}
		out = append(out, f...)
	}
	return out, nil
}

func hasHTTPField(ff *flow.FlowFilter) bool {
	return len(ff.GetHttpStatusCode())+len(ff.GetHttpMethod())+len(ff.GetHttpUrl())+len(ff.GetHttpPath())+len(ff.GetHttpHeader()) > 0
}

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
