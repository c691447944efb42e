// Package filters builds Hubble's flow filters (observer.GetFlowsRequest's
// whitelist and blacklist) with Hubble's meaning: a filter matches a
// flow when every field it sets matches, a field matches when any of its
// values does; a flow passes when no blacklist filter and, if there are
// any, some whitelist filter matches it. Each field, or family of related
// fields, has a Builder in a file of its own (ip.go, name.go, http.go,
// ...). Fields that only L7 records, DNS names or other parts fill match
// no flow without them, as in Cilium; experimental.cel_expression holds
// Hubble's CEL expressions on the flow (cel.go).
package filters

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// Func says whether a flow matches.
type Func func(*flow.Flow) bool

// Builder makes the filters of one field, or of a family of closely
// related fields, of a FlowFilter: none for the fields it leaves empty,
// or an error naming the first value it cannot honour. Each lives in a
// file of its own, with its test.
type Builder func(*flow.FlowFilter) ([]Func, error)

// builders are every field's. Their order is the order in which a filter
// with several bad fields reports them: the first.
var builders = []Builder{
	httpFilters,
	dnsFilters,
	clusterFilters,
	nodeLabelFilter,
	traceFilters,
	encryptedFilter,
	xlatedFilter,
	celFilter,
	uuidFilter,
	ipFilters,
	nameFilters,
	labelFilters,
	workloadFilters,
	directionFilter,
	verdictFilters,
	interfaceFilter,
	eventTypeFilter,
	protocolFilter,
	portFilters,
	replyFilter,
	identityFilters,
	tcpFlagsFilter,
	nodeNameFilter,
	ipVersionFilter,
}

// Set is a request's compiled whitelist and blacklist.
type Set struct{ whitelist, blacklist []Func }

// Compile builds a request's filters, or names the first field it
// cannot honour.
func Compile(whitelist, blacklist []*flow.FlowFilter) (*Set, error) {
	s := &Set{}
	for _, l := range []struct {
		name string
		in   []*flow.FlowFilter
		out  *[]Func
	}{{"whitelist", whitelist, &s.whitelist}, {"blacklist", blacklist, &s.blacklist}} {
		for i, ff := range l.in {
			f, err := build(ff)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", l.name, i, err)
			}
			*l.out = append(*l.out, f)
		}
	}
	return s, nil
}

// Pass says whether a flow passes the request's filters.
func (s *Set) Pass(f *flow.Flow) bool {
	for _, b := range s.blacklist {
		if b(f) {
			return false
		}
	}
	if len(s.whitelist) == 0 {
		return true
	}
	return slices.ContainsFunc(s.whitelist, func(w Func) bool { return w(f) })
}

// build makes one FlowFilter's filter: a flow matches when it matches
// every field that ff sets.
func build(ff *flow.FlowFilter) (Func, error) {
	var all []Func
	for _, b := range builders {
		fs, err := b(ff)
		if err != nil {
			return nil, err
		}
		all = append(all, fs...)
	}
	return func(f *flow.Flow) bool {
		for _, m := range all {
			if !m(f) {
				return false
			}
		}
		return true
	}, nil
}

// when builds a field's filter if the field has values: the shape of most
// builders.
func when[T any](values []T, filter func([]T) (Func, error)) ([]Func, error) {
	if len(values) == 0 {
		return nil, nil
	}
	f, err := filter(values)
	if err != nil {
		return nil, err
	}
	return []Func{f}, nil
}

// whenAll is when for a filter that cannot fail.
func whenAll[T any](values []T, filter func([]T) Func) ([]Func, error) {
	if len(values) == 0 {
		return nil, nil
	}
	return []Func{filter(values)}, nil
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
