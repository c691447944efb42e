package datapath

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
)

// An agent upgraded over the pins of an older datapath replaces the
// metrics map, whose layout changed (a per-CPU hash before), and keeps
// refusing maps whose content matters.
func TestPrivilegedOpenMapsOverOldPins(t *testing.T) {
	testenv.Privileged(t) // mounts a bpffs and creates BPF maps
	for _, tc := range []struct {
		name    string
		old     *ebpf.MapSpec
		wantErr bool
	}{
		{"metrics of another layout are replaced", &ebpf.MapSpec{Name: "cilium_metrics", Type: ebpf.PerCPUHash,
			KeySize: 4, ValueSize: 16, MaxEntries: 1024}, false},
		{"conntrack of another layout is refused", &ebpf.MapSpec{Name: "cilium_ct4", Type: ebpf.LRUHash,
			KeySize: 16, ValueSize: 8, MaxEntries: 16}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testnode.TempBPFFS(t)
			old, err := ebpf.NewMap(tc.old)
			must(t, err)
			defer old.Close()
			must(t, old.Pin(filepath.Join(dir, tc.old.Name)))
			m, err := OpenMaps(dir)
			if tc.wantErr {
				if err == nil {
					m.Close()
					t.Fatal("opened over an incompatible pin")
				}
				return
			}
			must(t, err)
			defer m.Close()
			if m.Metrics.Type() != ebpf.PerCPUArray {
				t.Fatalf("metrics map is a %v", m.Metrics.Type())
			}
			if _, err := os.Stat(filepath.Join(dir, "cilium_metrics")); err != nil {
				t.Fatalf("new metrics map not pinned: %v", err)
			}
			cs, err := m.Counters()
			if err != nil || len(cs) != 0 {
				t.Fatalf("counters %+v (%v), want none", cs, err)
			}
		})
	}
}

// The Maglev tables' size is their inner maps' layout, which the kernel
// keeps with the pinned map of maps but does not compare when it is
// opened: a restart with another --bpf-lb-maglev-table-size replaces
// the map, one with the same size keeps it and its tables, and the tools
// that read the maps (adopting them) change nothing.
func TestPrivilegedOpenMapsMaglevSize(t *testing.T) {
	testenv.Privileged(t)
	dir := testnode.TempBPFFS(t)
	table := make([]spec.BackendID, 251)
	for i := range table {
		table[i] = 1
	}
	write := func(m *Maps) {
		must(t, m.UpsertBackend(spec.Backend{ID: 1, Address: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: spec.ProtoTCP}))
		must(t, m.UpsertService(spec.Service{Frontend: spec.Frontend{Address: netip.MustParseAddr("192.0.2.1"), Port: 80,
			Protocol: spec.ProtoTCP}, Backends: []spec.BackendID{1}, RevNATIndex: 9, Flags: spec.LBMaglev, Maglev: table}))
	}
	m, err := OpenMaps(dir, WithMaglevTableSize(251))
	must(t, err)
	write(m)
	m.Close()

	m, err = OpenMaps(dir, WithMaglevTableSize(251))
	must(t, err)
	if got, ok, err := m.MaglevTable(9); err != nil || !ok || !slices.Equal(got, table) {
		t.Fatalf("same size: table %v (found %v, %v), want it kept", len(got), ok, err)
	}
	m.Close()

	ro, err := OpenPinnedMaps(dir)
	must(t, err)
	if got, ok, err := ro.MaglevTable(9); err != nil || !ok || len(got) != 251 {
		t.Fatalf("a tool reads %d slots (found %v, %v)", len(got), ok, err)
	}
	ro.Close()

	m, err = OpenMaps(dir, WithMaglevTableSize(509))
	must(t, err)
	defer m.Close()
	if _, ok, err := m.MaglevTable(9); err != nil || ok {
		t.Fatalf("another size: the old table is still there (%v)", err)
	}
	bigger := make([]spec.BackendID, 509)
	for i := range bigger {
		bigger[i] = 1
	}
	table = bigger
	write(m) // the kernel takes inner maps of the new size
	if got, ok, err := m.MaglevTable(9); err != nil || !ok || len(got) != 509 {
		t.Fatalf("new size: %d slots (found %v, %v)", len(got), ok, err)
	}
}

// Maps sized by the agent (--bpf-lb-map-max, --bpf-lb-maglev-table-size)
// are the ones every program family loads against: the objects take the
// maps' sizes.
func TestPrivilegedProgramsLoadOnSizedMaps(t *testing.T) {
	testenv.Privileged(t)
	m, err := OpenMaps("", WithLBMapMax(4096), WithMaglevTableSize(509))
	must(t, err)
	defer m.Close()
	node := NodeConstants{NodeIPv4: netip.MustParseAddr("192.168.1.1")}
	np, err := LoadNodePrograms(m, node)
	must(t, err)
	np.Close()
	ep, err := LoadEndpointPrograms(m, EndpointConstants{NodeConstants: node, ID: 1, Identity: 1001,
		IPv4: netip.MustParseAddr("10.1.0.10")})
	must(t, err)
	ep.Close()
	sp, err := LoadSocketPrograms(m, SocketOptions{NodeIPv4: node.NodeIPv4})
	must(t, err)
	sp.Close()
}
