package datapath

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
)

func TestPolicyMapStateDenyPropagation(t *testing.T) {
	state, err := PolicyMapState(5, []spec.PolicyEntry{
		egress(1000, tcpProto, 80, 0),
		egress(1000, tcpProto, 443, 0),
		denyRule(egress(1000, tcpProto, 0, 0)),
		egress(2000, tcpProto, 80, 0),
		egress(1000, udpProto, 53, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range state {
		deny := v.Flags&policyFlagDeny != 0
		wantDeny := k.Identity == 1000 && k.Protocol == tcpProto
		if deny != wantDeny || k.EpId != 5 {
			t.Errorf("key %+v deny=%v, want %v", k, deny, wantDeny)
		}
	}
	if len(state) != 5 {
		t.Fatalf("%d keys, want 5", len(state))
	}
}

func TestPolicyEntryValidation(t *testing.T) {
	for _, c := range []struct {
		entry spec.PolicyEntry
		want  string
	}{
		{spec.PolicyEntry{Direction: 0}, "bad direction"},
		{spec.PolicyEntry{Direction: spec.Egress, Port: 80}, "ports need a protocol"},
		{spec.PolicyEntry{Direction: spec.Egress, Protocol: tcpProto, Port: 90, EndPort: 80}, "end port 80 below port 90"},
		// Port 0 is every port: {0, 1023} would allow 8080.
		{spec.PolicyEntry{Direction: spec.Egress, Protocol: tcpProto, EndPort: 1023}, "end port 1023 without a start port"},
		// GRE has no ports: such a rule could never match.
		{spec.PolicyEntry{Direction: spec.Ingress, Protocol: 47, Port: 80}, "protocol 47 has no ports"},
	} {
		// The error names the offending entry among valid ones.
		entries := []spec.PolicyEntry{egress(idC, tcpProto, 80, 0), c.entry}
		_, err := PolicyMapState(1, entries)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "policy entry 1 (") {
			t.Errorf("entry %+v: error %v, want one naming entry 1 and %q", c.entry, err, c.want)
		}
	}
	if _, err := PolicyMapState(1, []spec.PolicyEntry{{Direction: spec.Egress, Protocol: spec.ProtoSCTP, Port: 80, EndPort: 90}}); err != nil {
		t.Errorf("SCTP port range: %v", err)
	}
}

func TestPrivilegedSetPolicyIsIdempotent(t *testing.T) {
	testenv.Privileged(t) // creates BPF maps
	m, err := OpenMaps("")
	must(t, err)
	t.Cleanup(func() { m.Close() })
	entries := []spec.PolicyEntry{egress(1000, tcpProto, 1, 1000), egress(2000, 0, 0, 0)}
	must(t, m.SetPolicy(1, entries))
	must(t, m.SetPolicy(2, entries[:1]))
	if ids, err := policyEndpoints(m); err != nil || !slices.Equal(ids, []uint16{1, 2}) {
		t.Fatalf("endpoints with policy %v (%v), want [1 2]", ids, err)
	}
	count := func() (n int) {
		for _, ep := range []uint16{1, 2} {
			state, err := m.PolicyState(ep)
			must(t, err)
			n += len(state)
		}
		return n
	}
	want := len(spec.PortPrefixes(1, 1000))*2 + 1
	if n := count(); n != want {
		t.Fatalf("%d entries, want %d", n, want)
	}
	must(t, m.SetPolicy(1, entries))
	if n := count(); n != want {
		t.Fatalf("after a second sync: %d entries, want %d", n, want)
	}
	must(t, m.SetPolicy(1, nil))
	if n := count(); n != want-len(spec.PortPrefixes(1, 1000))-1 {
		t.Fatalf("after clearing endpoint 1: %d entries", n)
	}
	if ids, err := policyEndpoints(m); err != nil || !slices.Equal(ids, []uint16{2}) {
		t.Fatalf("endpoints with policy after clearing 1: %v (%v), want [2]", ids, err)
	}
}

func TestPolicyEntryOfUndoesKeys(t *testing.T) {
	for _, e := range []spec.PolicyEntry{
		{Direction: spec.Ingress, Identity: 1234},
		{Direction: spec.Egress, Identity: 7, Protocol: 17},
		{Direction: spec.Ingress, Identity: 9, Protocol: 6, Port: 8080, Deny: true},
		{Direction: spec.Ingress, Identity: 9, Protocol: 6, Port: 8080, EndPort: 8087, ProxyPort: 15001},
	} {
		keys := policyKeys(3, e)
		if len(keys) != 1 {
			t.Fatalf("%+v: %d keys, the case wants one", e, len(keys))
		}
		state, err := PolicyMapState(3, []spec.PolicyEntry{e})
		if err != nil {
			t.Fatal(err)
		}
		if got := policyEntryOf(keys[0], state[keys[0]]); got != e {
			t.Errorf("got %+v, want %+v", got, e)
		}
	}
}

// policyEndpoints lists the endpoints whose policy maps hold entries, in
// order.
func policyEndpoints(m *Maps) ([]uint16, error) {
	var out []uint16
	var ep uint32
	var id uint32
	it := m.Policy.Iterate()
	for it.Next(&ep, &id) {
		state, err := m.PolicyState(uint16(ep))
		if err != nil {
			return nil, err
		}
		if len(state) > 0 {
			out = append(out, uint16(ep))
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate policy maps: %w", err)
	}
	slices.Sort(out)
	return out, nil
}
