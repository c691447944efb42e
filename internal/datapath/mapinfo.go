package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// MapSummary describes one of the node's maps for the agent's API.
type MapSummary struct {
	Name       string
	Type       string
	MaxEntries uint32
	// Entries is -1 for maps without keys (the events ring buffer).
	Entries int
}

// Summaries lists the node's maps with their entry counts. The counts are
// a snapshot: the kernel changes the maps while they are walked.
func (m *Maps) Summaries() ([]MapSummary, error) {
	names := []string{"cilium_lxc", "cilium_ipcache", "cilium_policy", "cilium_ct4", "cilium_frag4",
		"cilium_snat4", "cilium_metrics", "cilium_events"}
	var out []MapSummary
	for i, mp := range m.all() {
		s := MapSummary{Name: names[i], Type: mp.Type().String(), MaxEntries: mp.MaxEntries(), Entries: -1}
		if mp.Type() != ebpf.RingBuf {
			n, err := countKeys(mp)
			if err != nil {
				return nil, fmt.Errorf("count %s: %w", s.Name, err)
			}
			s.Entries = n
		}
		out = append(out, s)
	}
	return out, nil
}

// countKeys walks the keys at most MaxEntries times: a key deleted under
// the walk restarts it from the first key, which must not loop forever.
func countKeys(mp *ebpf.Map) (int, error) {
	var key any
	n := 0
	for n < int(mp.MaxEntries()) {
		next, err := mp.NextKeyBytes(key)
		if err != nil {
			return 0, err
		}
		if next == nil {
			break
		}
		n++
		key = next
	}
	return n, nil
}
