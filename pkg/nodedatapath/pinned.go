package nodedatapath

import "github.com/cilium-go/cilium/internal/datapath"

// OpenPinnedMaps opens the maps that a running agent pinned in dir,
// creating none, for tools beside the agent (the benchmarks) that read
// what it programmed. Close releases them; the pins stay.
func OpenPinnedMaps(dir string) (*datapath.Maps, error) { return datapath.OpenPinnedMaps(dir) }

// Cgroup2Root is where the cgroup v2 hierarchy is mounted, whose
// processes socket-level balancing (--bpf-lb-sock) serves.
func Cgroup2Root() (string, error) { return datapath.Cgroup2Root() }
