package filters

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// ipFilters: source_ip and destination_ip, each an address or a prefix.
func ipFilters(ff *flow.FlowFilter) ([]Func, error) {
	var out []Func
	for _, side := range []struct {
		name string
		ips  []string
		get  func(*flow.Flow) string
	}{{"source_ip", ff.GetSourceIp(), func(f *flow.Flow) string { return f.GetIP().GetSource() }},
		{"destination_ip", ff.GetDestinationIp(), func(f *flow.Flow) string { return f.GetIP().GetDestination() }}} {
		fs, err := when(side.ips, func(ips []string) (Func, error) {
			m, err := ipMatcher(side.name, ips)
			return func(f *flow.Flow) bool { return m(side.get(f)) }, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// xlatedFilter: source_ip_xlated, the source address after translation.
func xlatedFilter(ff *flow.FlowFilter) ([]Func, error) {
	return when(ff.GetSourceIpXlated(), func(v []string) (Func, error) {
		m, err := ipMatcher("source_ip_xlated", v)
		return func(f *flow.Flow) bool { return m(f.GetIP().GetSourceXlated()) }, err
	})
}

// encryptedFilter: whether the packet was encrypted; a flow without an IP
// header matches neither.
func encryptedFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetEncrypted(), func(v []bool) Func {
		return func(f *flow.Flow) bool { return f.GetIP() != nil && slices.Contains(v, f.GetIP().GetEncrypted()) }
	})
}

// ipVersionFilter: a flow without an IP header has no version.
func ipVersionFilter(ff *flow.FlowFilter) ([]Func, error) {
	return whenAll(ff.GetIpVersion(), func(v []flow.IPVersion) Func {
		return func(f *flow.Flow) bool { return f.GetIP() != nil && slices.Contains(v, f.GetIP().GetIpVersion()) }
	})
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
