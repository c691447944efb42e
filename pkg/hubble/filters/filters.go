// Package filters builds Hubble's flow filters (observer.GetFlowsRequest's
// whitelist and blacklist) with Hubble's meaning: a filter matches a
// flow when every field it sets matches, a field matches when any of its
// values does; a flow passes when no blacklist filter and, if there are
// any, some whitelist filter matches it. Fields that only L7 records,
// DNS names or other parts fill (l7.go) match no flow without them, as in
// Cilium; experimental.cel_expression holds Hubble's CEL expressions on
// the flow (cel.go).
package filters

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
)

// Func says whether a flow matches.
type Func func(*flow.Flow) bool

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

func build(ff *flow.FlowFilter) (Func, error) {
	all, err := l7Filters(ff)
	if err != nil {
		return nil, err
	}
	if v := ff.GetExperimental().GetCelExpression(); len(v) > 0 {
		m, err := celExpressions(v)
		if err != nil {
			return nil, err
		}
		all = append(all, m)
	}
	add := func(fs ...Func) { all = append(all, fs...) }
	if v := ff.GetUuid(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return slices.Contains(v, f.GetUuid()) })
	}
	for _, side := range []struct {
		name string
		ips  []string
		get  func(*flow.Flow) string
	}{{"source_ip", ff.GetSourceIp(), func(f *flow.Flow) string { return f.GetIP().GetSource() }},
		{"destination_ip", ff.GetDestinationIp(), func(f *flow.Flow) string { return f.GetIP().GetDestination() }}} {
		if len(side.ips) == 0 {
			continue
		}
		m, err := ipMatcher(side.name, side.ips)
		if err != nil {
			return nil, err
		}
		add(func(f *flow.Flow) bool { return m(side.get(f)) })
	}
	for _, side := range []struct {
		name  string
		names []string
		get   func(*flow.Flow) (ns, name string)
	}{
		{"source_pod", ff.GetSourcePod(), func(f *flow.Flow) (string, string) {
			return f.GetSource().GetNamespace(), f.GetSource().GetPodName()
		}},
		{"destination_pod", ff.GetDestinationPod(), func(f *flow.Flow) (string, string) {
			return f.GetDestination().GetNamespace(), f.GetDestination().GetPodName()
		}},
		{"source_service", ff.GetSourceService(), func(f *flow.Flow) (string, string) {
			return f.GetSourceService().GetNamespace(), f.GetSourceService().GetName()
		}},
		{"destination_service", ff.GetDestinationService(), func(f *flow.Flow) (string, string) {
			return f.GetDestinationService().GetNamespace(), f.GetDestinationService().GetName()
		}},
	} {
		if len(side.names) == 0 {
			continue
		}
		m, err := nameMatcher(side.name, side.names)
		if err != nil {
			return nil, err
		}
		add(func(f *flow.Flow) bool { return m(side.get(f)) })
	}
	for _, side := range []struct {
		name      string
		selectors []string
		get       func(*flow.Flow) []string
	}{{"source_label", ff.GetSourceLabel(), func(f *flow.Flow) []string { return f.GetSource().GetLabels() }},
		{"destination_label", ff.GetDestinationLabel(), func(f *flow.Flow) []string { return f.GetDestination().GetLabels() }}} {
		if len(side.selectors) == 0 {
			continue
		}
		var sels []selector
		for _, s := range side.selectors {
			sel, err := parseSelector(s)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", side.name, s, err)
			}
			sels = append(sels, sel)
		}
		add(func(f *flow.Flow) bool {
			ls := side.get(f)
			return slices.ContainsFunc(sels, func(s selector) bool { return s.matches(ls) })
		})
	}
	for _, side := range []struct {
		ws  []*flow.Workload
		get func(*flow.Flow) []*flow.Workload
	}{{ff.GetSourceWorkload(), func(f *flow.Flow) []*flow.Workload { return f.GetSource().GetWorkloads() }},
		{ff.GetDestinationWorkload(), func(f *flow.Flow) []*flow.Workload { return f.GetDestination().GetWorkloads() }}} {
		if len(side.ws) == 0 {
			continue
		}
		add(func(f *flow.Flow) bool {
			return slices.ContainsFunc(side.get(f), func(have *flow.Workload) bool {
				return slices.ContainsFunc(side.ws, func(want *flow.Workload) bool {
					return (want.GetName() == "" || want.GetName() == have.GetName()) && (want.GetKind() == "" || want.GetKind() == have.GetKind())
				})
			})
		})
	}
	if v := ff.GetTrafficDirection(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return slices.Contains(v, f.GetTrafficDirection()) })
	}
	if v := ff.GetVerdict(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return slices.Contains(v, f.GetVerdict()) })
	}
	if v := ff.GetDropReasonDesc(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return slices.Contains(v, f.GetDropReasonDesc()) })
	}
	if v := ff.GetInterface(); len(v) > 0 {
		add(func(f *flow.Flow) bool {
			have := f.GetInterface()
			return have != nil && slices.ContainsFunc(v, func(want *flow.NetworkInterface) bool {
				return (want.GetIndex() == 0 || want.GetIndex() == have.GetIndex()) && (want.GetName() == "" || want.GetName() == have.GetName())
			})
		})
	}
	if v := ff.GetEventType(); len(v) > 0 {
		add(func(f *flow.Flow) bool {
			have := f.GetEventType()
			return have != nil && slices.ContainsFunc(v, func(want *flow.EventTypeFilter) bool {
				return want.GetType() == have.GetType() && (!want.GetMatchSubType() || want.GetSubType() == have.GetSubType())
			})
		})
	}
	if v := ff.GetProtocol(); len(v) > 0 {
		m, err := protocol(v)
		if err != nil {
			return nil, err
		}
		add(m)
	}
	for _, side := range []struct {
		name  string
		ports []string
		get   func(*flow.Flow) (uint32, bool)
	}{{"source_port", ff.GetSourcePort(), func(f *flow.Flow) (uint32, bool) { s, _, ok := flows.Ports(f); return s, ok }},
		{"destination_port", ff.GetDestinationPort(), func(f *flow.Flow) (uint32, bool) { _, d, ok := flows.Ports(f); return d, ok }}} {
		if len(side.ports) == 0 {
			continue
		}
		var want []uint32
		for _, p := range side.ports {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%s %q: not a port number", side.name, p)
			}
			want = append(want, uint32(n))
		}
		add(func(f *flow.Flow) bool {
			p, ok := side.get(f)
			return ok && slices.Contains(want, p)
		})
	}
	if v := ff.GetReply(); len(v) > 0 {
		add(func(f *flow.Flow) bool {
			// As Hubble: a drop whose direction is unknown counts as no reply.
			if f.GetIsReply() == nil && f.GetVerdict() != flow.Verdict_DROPPED {
				return false
			}
			return slices.Contains(v, f.GetIsReply().GetValue())
		})
	}
	if v := ff.GetSourceIdentity(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return slices.Contains(v, f.GetSource().GetIdentity()) })
	}
	if v := ff.GetDestinationIdentity(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return slices.Contains(v, f.GetDestination().GetIdentity()) })
	}
	if v := ff.GetTcpFlags(); len(v) > 0 {
		add(func(f *flow.Flow) bool {
			have := f.GetL4().GetTCP().GetFlags()
			return have != nil && slices.ContainsFunc(v, func(want *flow.TCPFlags) bool { return hasFlags(have, want) })
		})
	}
	if v := ff.GetNodeName(); len(v) > 0 {
		for _, p := range v {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("node_name %q: %w", p, err)
			}
		}
		add(func(f *flow.Flow) bool {
			return slices.ContainsFunc(v, func(p string) bool { return nodeMatches(p, f.GetNodeName()) })
		})
	}
	if v := ff.GetIpVersion(); len(v) > 0 {
		add(func(f *flow.Flow) bool { return f.GetIP() != nil && slices.Contains(v, f.GetIP().GetIpVersion()) })
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

// ipMatcher matches addresses and prefixes.
func ipMatcher(field string, values []string) (func(string) bool, error) {
	var prefixes []netip.Prefix
	for _, v := range values {
		if p, err := netip.ParsePrefix(v); err == nil {
			prefixes = append(prefixes, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: neither an address nor a prefix", field, v)
		}
		prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return func(s string) bool {
		a, err := netip.ParseAddr(s)
		return err == nil && slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
	}, nil
}

// nameMatcher matches namespace/name-prefix as Hubble does: "ns/" is
// any name in ns, "/prefix" any namespace, and a bare "prefix" the
// default namespace.
func nameMatcher(field string, values []string) (func(ns, name string) bool, error) {
	type want struct{ ns, prefix string }
	var ws []want
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("%s: an empty name", field)
		}
		ns, name, found := strings.Cut(v, "/")
		if !found {
			ns, name = "default", v
		}
		ws = append(ws, want{ns, name})
	}
	return func(ns, name string) bool {
		if ns == "" && name == "" {
			return false
		}
		return slices.ContainsFunc(ws, func(w want) bool {
			return (w.ns == "" || w.ns == ns) && strings.HasPrefix(name, w.prefix)
		})
	}, nil
}

// hasFlags: every flag that want sets is set in have.
func hasFlags(have, want *flow.TCPFlags) bool {
	return (!want.GetFIN() || have.GetFIN()) && (!want.GetSYN() || have.GetSYN()) && (!want.GetRST() || have.GetRST()) &&
		(!want.GetPSH() || have.GetPSH()) && (!want.GetACK() || have.GetACK()) && (!want.GetURG() || have.GetURG()) &&
		(!want.GetECE() || have.GetECE()) && (!want.GetCWR() || have.GetCWR()) && (!want.GetNS() || have.GetNS())
}

// nodeMatches matches a node name against a pattern with wildcards; a
// pattern of the cluster/node form matches the node part (cilium-go has
// one cluster).
func nodeMatches(pattern, node string) bool {
	if _, p, ok := strings.Cut(pattern, "/"); ok {
		pattern = p
	}
	ok, _ := path.Match(pattern, node)
	return ok
}
