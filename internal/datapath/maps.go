package datapath

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Maps are the node's shared BPF maps. Every program object of the node
// is loaded against these same maps. Each map family has its own file
// (endpoints, ipcache, policy, conntrack, nat, metrics, events,
// routecache); their listing methods read the kernel's state, not the
// desired one, for restore after a restart and for the debugging CLI.
type Maps struct {
	Endpoints *ebpf.Map
	IPCache   *ebpf.Map
	Policy    *ebpf.Map
	CT4       *ebpf.Map
	Frag4     *ebpf.Map
	SNAT4     *ebpf.Map
	Metrics   *ebpf.Map
	Events    *ebpf.Map
	// FIB4 caches routing answers per CPU; FIBGen is the generation that
	// invalidates them (InvalidateRoutes). Internal to the datapath: not
	// in Summaries.
	FIB4   *ebpf.Map
	FIBGen *ebpf.Map
}

// disposable maps hold nothing the datapath cannot lose: a pin of an
// older layout is replaced rather than refused.
var disposable = map[string]bool{"cilium_metrics": true, "cilium_fib4": true, "cilium_fib_gen": true}

// OpenMaps creates the maps, or opens them when already pinned in pinDir.
// An empty pinDir gives unpinned maps, as BPF program tests want.
func OpenMaps(pinDir string) (*Maps, error) {
	spec, err := loadLxc()
	if err != nil {
		return nil, fmt.Errorf("load lxc spec: %w", err)
	}
	var specs lxcMapSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("assign map specs: %w", err)
	}
	m := &Maps{}
	for _, x := range []struct {
		spec *ebpf.MapSpec
		dst  **ebpf.Map
	}{
		{specs.CiliumLxc, &m.Endpoints},
		{specs.CiliumIpcache, &m.IPCache},
		{specs.CiliumPolicy, &m.Policy},
		{specs.CiliumCt4, &m.CT4},
		{specs.CiliumFrag4, &m.Frag4},
		{specs.CiliumSnat4, &m.SNAT4},
		{specs.CiliumMetrics, &m.Metrics},
		{specs.CiliumEvents, &m.Events},
		{specs.CiliumFib4, &m.FIB4},
		{specs.CiliumFibGen, &m.FIBGen},
	} {
		s := x.spec.Copy()
		if pinDir == "" {
			s.Pinning = ebpf.PinNone
		}
		mp, err := ebpf.NewMapWithOptions(s, ebpf.MapOptions{PinPath: pinDir})
		if errors.Is(err, ebpf.ErrMapIncompatible) && disposable[s.Name] {
			// Pinned by an older datapath with another layout: its
			// content may be lost, so a new map replaces it.
			if err = os.Remove(filepath.Join(pinDir, s.Name)); err == nil {
				mp, err = ebpf.NewMapWithOptions(s, ebpf.MapOptions{PinPath: pinDir})
			}
		}
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("map %s: %w", s.Name, err)
		}
		*x.dst = mp
	}
	return m, nil
}

// Close releases the file descriptors; pinned maps stay.
func (m *Maps) Close() error {
	var errs []error
	for _, mp := range append(m.all(), m.FIB4, m.FIBGen) {
		if mp != nil {
			errs = append(errs, mp.Close())
		}
	}
	return errors.Join(errs...)
}

func (m *Maps) all() []*ebpf.Map {
	return []*ebpf.Map{m.Endpoints, m.IPCache, m.Policy, m.CT4, m.Frag4, m.SNAT4, m.Metrics, m.Events}
}

// replacements lets a program object use these maps instead of its own.
func (m *Maps) replacements() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"cilium_lxc":     m.Endpoints,
		"cilium_ipcache": m.IPCache,
		"cilium_policy":  m.Policy,
		"cilium_ct4":     m.CT4,
		"cilium_frag4":   m.Frag4,
		"cilium_snat4":   m.SNAT4,
		"cilium_metrics": m.Metrics,
		"cilium_events":  m.Events,
		"cilium_fib4":    m.FIB4,
		"cilium_fib_gen": m.FIBGen,
	}
}

// ErrMapFull says that a map had no room for an update, which was then
// not applied.
var ErrMapFull = errors.New("map full")

// markFull wraps the kernel's "no room" errors (a hash or LPM map at
// max_entries) so that callers can tell them apart with ErrMapFull.
func markFull(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.E2BIG) {
		return fmt.Errorf("%w: %w", ErrMapFull, err)
	}
	return err
}

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
