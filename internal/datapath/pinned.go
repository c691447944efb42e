package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// ErrNotPinned is returned by OpenPinnedMaps when a map is not pinned.
var ErrNotPinned = errors.New("map not pinned")

// OpenPinnedMaps opens the maps a running (or stopped) node pinned in
// pinDir, for tools that read the datapath beside the agent. Unlike
// OpenMaps it creates nothing: a tool pointed at the wrong directory must
// not leave empty maps there that a starting agent would then adopt.
func OpenPinnedMaps(pinDir string) (*Maps, error) {
	var m Maps
	for _, name := range slices.Sorted(maps.Keys(m.replacements())) {
		if _, err := os.Stat(filepath.Join(pinDir, name)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s in %s: %w", name, pinDir, ErrNotPinned)
			}
			return nil, fmt.Errorf("pinned map %s: %w", name, err)
		}
	}
	return OpenMaps(pinDir)
}

// PolicyEntries reads one endpoint's policy back as entries, one per map
// key: a port range that SetPolicy split into aligned blocks comes back as
// those blocks.
func (m *Maps) PolicyEntries(epID uint16) ([]spec.PolicyEntry, error) {
	state, err := m.PolicyState(epID)
	if err != nil {
		return nil, err
	}
	out := make([]spec.PolicyEntry, 0, len(state))
	for k, v := range state {
		out = append(out, policyEntryOf(k, v))
	}
	slices.SortFunc(out, func(a, b spec.PolicyEntry) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Identity, b.Identity),
			cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), cmp.Compare(a.EndPort, b.EndPort))
	})
	return out, nil
}

// policyEntryOf undoes PolicyEntry.keys for one key.
func policyEntryOf(k PolicyKey, v PolicyValue) spec.PolicyEntry {
	e := spec.PolicyEntry{Direction: spec.Direction(k.Direction), Identity: identity.NumericIdentity(k.Identity),
		Deny: v.Flags&policyFlagDeny != 0, ProxyPort: v.ProxyPort}
	if k.Prefixlen < policyPrefixProto {
		return e
	}
	e.Protocol = k.Protocol
	bits := int(k.Prefixlen) - policyPrefixProto
	if bits <= 0 {
		return e
	}
	e.Port = htons(k.Dport)
	if bits < 16 {
		e.EndPort = e.Port + uint16(1)<<(16-bits) - 1
	}
	return e
}
