package datapath

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
)

// A service grows and shrinks slot by slot, and what the maps say reads
// back as it was written.
func TestPrivilegedServiceMaps(t *testing.T) {
	testenv.Privileged(t) // creates BPF maps
	m, err := OpenMaps("")
	must(t, err)
	defer m.Close()

	f := spec.Frontend{Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Protocol: spec.ProtoUDP}
	fi := f
	fi.Scope = spec.ScopeInternal
	for _, b := range []spec.Backend{
		{ID: 1, Address: netip.MustParseAddr("10.244.1.5"), Port: 5353, Protocol: spec.ProtoUDP},
		{ID: 2, Address: netip.MustParseAddr("10.244.2.5"), Port: 5353, Protocol: spec.ProtoUDP, Terminating: true},
	} {
		must(t, m.UpsertBackend(b))
	}
	svc := spec.Service{Frontend: f, Backends: []spec.BackendID{1, 2, 1}, RevNATIndex: 7,
		Flags: spec.LBAffinity | spec.LBTwoScopes, AffinityTimeout: 10800}
	must(t, m.UpsertService(svc))
	must(t, m.UpsertService(spec.Service{Frontend: fi, Backends: []spec.BackendID{1}, RevNATIndex: 7}))
	must(t, m.UpsertRevNAT(spec.RevNAT{Index: 7, Address: f.Address, Port: 53}))

	got, err := m.Services()
	must(t, err)
	want := []spec.Service{svc, {Frontend: fi, Backends: []spec.BackendID{1}, RevNATIndex: 7}}
	if !slices.EqualFunc(got, want, sameService) {
		t.Fatalf("services %+v, want %+v", got, want)
	}

	// One frontend's backends read back in slot order; a frontend not in
	// the maps has none.
	one, err := m.ServiceBackends(f)
	must(t, err)
	if ids := backendIDs(one); !slices.Equal(ids, svc.Backends) || !one[1].Terminating || one[0].Port != 5353 {
		t.Errorf("backends of %s read back as %+v", f, one)
	}
	none, err := m.ServiceBackends(spec.Frontend{Address: f.Address, Port: 54, Protocol: spec.ProtoUDP})
	if err != nil || len(none) != 0 {
		t.Errorf("backends of a frontend not in the maps: %+v, %v", none, err)
	}

	// Shrinking removes the slots past the new count.
	svc.Backends = []spec.BackendID{2}
	must(t, m.UpsertService(svc))
	// Two service entries and one slot each.
	if c := countEntries(t, m); c != 4 {
		t.Errorf("%d entries in the services map after shrinking, want 4", c)
	}
	backends, err := m.Backends()
	must(t, err)
	if b := backends[2]; !b.Terminating || b.Port != 5353 || b.Address != netip.MustParseAddr("10.244.2.5") {
		t.Errorf("backend 2 reads back as %+v", b)
	}
	revs, err := m.RevNATs()
	must(t, err)
	if r := revs[7]; r.Address != f.Address || r.Port != 53 {
		t.Errorf("reverse NAT 7 reads back as %+v", r)
	}

	must(t, m.DeleteService(f))
	must(t, m.DeleteService(f)) // twice: no error
	must(t, m.DeleteService(fi))
	if c := countEntries(t, m); c != 0 {
		t.Errorf("%d entries left in the services map", c)
	}
	if err := m.UpsertService(spec.Service{Frontend: f, RevNATIndex: 0}); err == nil {
		t.Error("a service without a reverse NAT index was written")
	}
	if err := m.UpsertBackend(spec.Backend{ID: 3, Address: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: 1}); err == nil {
		t.Error("an ICMP backend was written")
	}
}

func backendIDs(bs []spec.Backend) []spec.BackendID {
	var out []spec.BackendID
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func sameService(a, b spec.Service) bool {
	return a.Frontend == b.Frontend && slices.Equal(a.Backends, b.Backends) && a.RevNATIndex == b.RevNATIndex &&
		a.Flags == b.Flags && a.AffinityTimeout == b.AffinityTimeout
}

func countEntries(t *testing.T, m *Maps) int {
	t.Helper()
	var k LB4Key
	var v LB4Service
	n := 0
	it := m.LB4Services.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	must(t, it.Err())
	return n
}
