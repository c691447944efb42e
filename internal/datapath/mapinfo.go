package datapath

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// MapSummary describes one of the node's maps for the agent's API.
type MapSummary struct {
	Name string
	// In names the pinned map that holds this one (an endpoint's policy
	// map is in cilium_policy_v2); empty for a pinned map.
	In         string
	Type       string
	MaxEntries uint32
	// Entries is -1 for maps without keys (the events ring buffer).
	Entries int
}

// Summaries lists the node's maps with their entry counts. The counts are
// a snapshot: the kernel changes the maps while they are walked.
func (m *Maps) Summaries() ([]MapSummary, error) {
	var out []MapSummary
	for _, d := range mapTable {
		if d.internal {
			continue
		}
		mp := *d.field(m)
		s := MapSummary{Name: d.name, Type: mp.Type().String(), MaxEntries: mp.MaxEntries(), Entries: -1}
		if mp.Type() != ebpf.RingBuf {
			n, err := countKeys(mp)
			if err != nil {
				return nil, fmt.Errorf("count %s: %w", s.Name, err)
			}
			s.Entries = n
		}
		out = append(out, s)
	}
	policies, err := m.policySummaries()
	return append(out, policies...), err
}

// policySummaries lists the endpoints' policy maps, in the order of
// their endpoints.
func (m *Maps) policySummaries() ([]MapSummary, error) {
	var eps []uint16
	var ep uint32
	var id ebpf.MapID
	it := m.Policy.Iterate()
	for it.Next(&ep, &id) {
		eps = append(eps, uint16(ep))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate policy maps: %w", err)
	}
	slices.Sort(eps)
	var out []MapSummary
	for _, ep := range eps {
		mp, err := m.policyMapOf(ep)
		if err != nil || mp == nil {
			continue // gone meanwhile
		}
		n, err := countKeys(mp)
		mp.Close()
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", PolicyMapName(ep), err)
		}
		out = append(out, MapSummary{Name: PolicyMapName(ep), In: "cilium_policy_v2", Type: ebpf.LPMTrie.String(),
			MaxEntries: mp.MaxEntries(), Entries: n})
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
