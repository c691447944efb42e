package datapath

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

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
