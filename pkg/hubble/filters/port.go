package filters

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
)

// portFilters: source_port and destination_port, of TCP, UDP or SCTP.
func portFilters(ff *flow.FlowFilter) ([]Func, error) {
	var out []Func
	for _, side := range []struct {
		name  string
		ports []string
		get   func(*flow.Flow) (uint32, bool)
	}{{"source_port", ff.GetSourcePort(), func(f *flow.Flow) (uint32, bool) { s, _, ok := flows.Ports(f); return s, ok }},
		{"destination_port", ff.GetDestinationPort(), func(f *flow.Flow) (uint32, bool) { _, d, ok := flows.Ports(f); return d, ok }}} {
		fs, err := when(side.ports, func(ports []string) (Func, error) {
			var want []uint32
			for _, p := range ports {
				n, err := strconv.ParseUint(p, 10, 16)
				if err != nil {
					return nil, fmt.Errorf("%s %q: not a port number", side.name, p)
				}
				want = append(want, uint32(n))
			}
			return func(f *flow.Flow) bool {
				p, ok := side.get(f)
				return ok && slices.Contains(want, p)
			}, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}
