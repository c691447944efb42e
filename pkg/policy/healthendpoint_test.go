package policy

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// The health endpoint takes the probes (TCP 4240, ICMP echo) from the
// nodes and the health endpoints, and nothing from pods; with policy
// off, the agent's mode wins.
func TestHealthEndpointTakesOnlyTheProbes(t *testing.T) {
	probe := func(id identity.NumericIdentity, proto uint8, port uint16) spec.PolicyEntry {
		return spec.PolicyEntry{Direction: spec.Ingress, Identity: id, Protocol: proto, Port: port}
	}
	for _, tc := range []struct {
		mode Mode
		want []spec.PolicyEntry
	}{
		{ModeDefault, []spec.PolicyEntry{
			probe(identity.Host, 0, 0), // the node reaches its endpoints (allow-localhost)
			probe(identity.Host, spec.ProtoTCP, 4240), probe(identity.Host, spec.ProtoICMP, 8),
			probe(identity.RemoteNode, spec.ProtoTCP, 4240), probe(identity.RemoteNode, spec.ProtoICMP, 8),
			probe(identity.Health, spec.ProtoTCP, 4240), probe(identity.Health, spec.ProtoICMP, 8),
			{Direction: spec.Egress}, // egress is not isolated
		}},
		{ModeNever, []spec.PolicyEntry{{Direction: spec.Ingress}, {Direction: spec.Egress}}},
	} {
		e := NewEngine(tc.mode)
		pod := appIdentity(1000, "client")
		e.UpsertIdentity(pod)
		e.UpsertEndpoint(EndpointInfo{ID: 1, Identity: identity.Health})
		e.UpsertEndpoint(EndpointInfo{ID: 2, Identity: pod.ID})
		e.Flush()
		got := slices.Collect(maps.Keys(e.Entries(1)))
		slices.SortFunc(got, comparePolicyEntries)
		want := slices.Clone(tc.want)
		slices.SortFunc(want, comparePolicyEntries)
		if !slices.Equal(got, want) {
			t.Errorf("mode %v: health endpoint's entries\n%v\nwant\n%v", tc.mode, got, want)
		}
		// A pod's own policy is untouched: allow-all both ways.
		if n := len(e.Entries(2)); n != 2 {
			t.Errorf("mode %v: pod's entries %v", tc.mode, e.Entries(2))
		}
	}
}

func comparePolicyEntries(a, b spec.PolicyEntry) int {
	for _, c := range [][2]int{{int(a.Direction), int(b.Direction)}, {int(a.Identity), int(b.Identity)},
		{int(a.Protocol), int(b.Protocol)}, {int(a.Port), int(b.Port)}} {
		if c[0] != c[1] {
			return c[0] - c[1]
		}
	}
	return 0
}
