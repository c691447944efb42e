package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	// Services: frontends with their backend slots, backends, the
	// reverse translation of replies, and client affinity.
	LB4Services   *ebpf.Map
	LB4Backends   *ebpf.Map
	LB4ReverseNAT *ebpf.Map
	LBAffinity    *ebpf.Map
	// LB4SourceRange holds the prefixes of the clients that frontends
	// with source ranges admit.
	LB4SourceRange *ebpf.Map
	// LB4ReverseSock is what sockets that socket-level balancing
	// translated see as their peer (sock.go).
	LB4ReverseSock *ebpf.Map
	// L2Responder holds the addresses the node answers ARP for, and
	// L2Liveness the agent's heartbeat (l2responder.go).
	L2Responder *ebpf.Map
	L2Liveness  *ebpf.Map
	// LB4Maglev holds the frontends' Maglev tables (maglev.go), made
	// from maglevInner, of maglevSize slots.
	LB4Maglev   *ebpf.Map
	maglevInner *ebpf.MapSpec
	maglevSize  uint32

	// groups indexes the endpoints' policy maps by policy group, so that
	// a group is rewritten without reading a map (policygroup.go);
	// policyInner is the template they are made from.
	groups      *policyGroups
	policyInner *ebpf.MapSpec
}

// mapDef is one row of mapTable.
type mapDef struct {
	// name is the map's name in C, which is also its pin's.
	name string
	// spec picks the map from the generated specs: a map renamed in C
	// fails to compile here rather than to load.
	spec  func(*lxcMapSpecs) *ebpf.MapSpec
	field func(*Maps) **ebpf.Map
	// disposable maps hold nothing the datapath cannot lose: a pin of an
	// older layout is replaced rather than refused.
	disposable bool
	// internal maps are the datapath's own business, not in Summaries.
	internal bool
	// lbSized maps take their size from WithLBMapMax.
	lbSized bool
	// maglev is the map of Maglev tables, whose inner maps' size is the
	// agent's (WithMaglevTableSize): a pin with inner maps of another is
	// replaced, and programs load against the size chosen.
	maglev bool
}

// mapTable is the one list of the node's maps: opening, closing, the
// pinned-map check, Summaries and the programs' map replacements all
// walk it, so a new map is added in one place.
var mapTable = []mapDef{
	{name: "cilium_lxc", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLxc },
		field: func(m *Maps) **ebpf.Map { return &m.Endpoints }},
	{name: "cilium_ipcache", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumIpcache },
		field: func(m *Maps) **ebpf.Map { return &m.IPCache }},
	{name: "cilium_policy_v2", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumPolicyV2 },
		field: func(m *Maps) **ebpf.Map { return &m.Policy }, internal: true},
	{name: "cilium_ct4", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumCt4 },
		field: func(m *Maps) **ebpf.Map { return &m.CT4 }},
	{name: "cilium_frag4", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumFrag4 },
		field: func(m *Maps) **ebpf.Map { return &m.Frag4 }},
	{name: "cilium_snat4", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumSnat4 },
		field: func(m *Maps) **ebpf.Map { return &m.SNAT4 }},
	{name: "cilium_metrics", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumMetrics },
		field: func(m *Maps) **ebpf.Map { return &m.Metrics }, disposable: true},
	{name: "cilium_events", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumEvents },
		field: func(m *Maps) **ebpf.Map { return &m.Events }},
	{name: "cilium_fib4", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumFib4 },
		field: func(m *Maps) **ebpf.Map { return &m.FIB4 }, disposable: true, internal: true},
	{name: "cilium_fib_gen", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumFibGen },
		field: func(m *Maps) **ebpf.Map { return &m.FIBGen }, disposable: true, internal: true},
	{name: "cilium_lb4_services", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLb4Services },
		field: func(m *Maps) **ebpf.Map { return &m.LB4Services }, lbSized: true},
	{name: "cilium_lb4_backends", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLb4Backends },
		field: func(m *Maps) **ebpf.Map { return &m.LB4Backends }, lbSized: true},
	{name: "cilium_lb4_reverse_nat", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLb4ReverseNat },
		field: func(m *Maps) **ebpf.Map { return &m.LB4ReverseNAT }, lbSized: true},
	{name: "cilium_lb_affinity", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLbAffinity },
		field: func(m *Maps) **ebpf.Map { return &m.LBAffinity }, disposable: true, lbSized: true},
	// Losing it only keeps every client out of the fenced frontends until
	// the reconciler writes it again.
	{name: "cilium_lb4_source_range", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLb4SourceRange },
		field: func(m *Maps) **ebpf.Map { return &m.LB4SourceRange }, disposable: true, lbSized: true},
	{name: "cilium_lb4_reverse_sk", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLb4ReverseSk },
		field: func(m *Maps) **ebpf.Map { return &m.LB4ReverseSock }, disposable: true, lbSized: true},
	{name: "cilium_l2_responder_v4", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumL2ResponderV4 },
		field: func(m *Maps) **ebpf.Map { return &m.L2Responder }},
	{name: "cilium_l2_liveness", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumL2Liveness },
		field: func(m *Maps) **ebpf.Map { return &m.L2Liveness }, disposable: true, internal: true},
	// Losing it only sends clients from outside to backends at random
	// until the reconciler writes the tables again.
	{name: "cilium_lb4_maglev", spec: func(s *lxcMapSpecs) *ebpf.MapSpec { return s.CiliumLb4Maglev },
		field: func(m *Maps) **ebpf.Map { return &m.LB4Maglev }, disposable: true, maglev: true},
}

// MapOption changes how OpenMaps creates maps.
type MapOption func(*mapOptions)

type mapOptions struct {
	lbMapMax, policyMapMax, maglevSize uint32
	// adopt takes the pinned maps as they are, changing nothing.
	adopt bool
}

// WithLBMapMax sizes the service maps (Cilium's --bpf-lb-map-max); 0
// keeps the compiled size.
func WithLBMapMax(n uint32) MapOption { return func(o *mapOptions) { o.lbMapMax = n } }

// WithPolicyMapMax sizes the endpoints' policy maps made from now on
// (Cilium's --bpf-policy-map-max); 0 keeps the compiled size. A map made
// smaller before is replaced when an update needs the room.
func WithPolicyMapMax(n uint32) MapOption { return func(o *mapOptions) { o.policyMapMax = n } }

// WithMaglevTableSize gives the Maglev tables n slots (Cilium's
// --bpf-lb-maglev-table-size); 0 keeps the compiled size. Pinned tables
// of another size are replaced.
func WithMaglevTableSize(n uint32) MapOption { return func(o *mapOptions) { o.maglevSize = n } }

// stalePins are the pins of maps that earlier datapaths had and this one
// has not: the shared policy map of before per-endpoint policy maps.
// Programs that still use them keep them until they are replaced.
var stalePins = []string{"cilium_policy"}

// OpenMaps creates the maps, or opens them when already pinned in pinDir.
// An empty pinDir gives unpinned maps, as BPF program tests want.
func OpenMaps(pinDir string, opts ...MapOption) (*Maps, error) {
	var o mapOptions
	for _, opt := range opts {
		opt(&o)
	}
	var specs lxcMapSpecs
	cs, err := loadLxc()
	if err != nil {
		return nil, fmt.Errorf("load lxc spec: %w", err)
	}
	if err := cs.Assign(&specs); err != nil {
		return nil, fmt.Errorf("assign map specs: %w", err)
	}
	m := &Maps{groups: &policyGroups{max: specs.CiliumPolicyV2.InnerMap.MaxEntries}, policyInner: specs.CiliumPolicyV2.InnerMap}
	if o.policyMapMax != 0 {
		m.groups.max = o.policyMapMax
	}
	specs.CiliumLb4Maglev = specs.CiliumLb4Maglev.Copy()
	if o.maglevSize != 0 {
		specs.CiliumLb4Maglev.InnerMap.ValueSize = 4 * o.maglevSize
	}
	m.maglevInner = specs.CiliumLb4Maglev.InnerMap
	m.maglevSize = m.maglevInner.ValueSize / 4
	for _, d := range mapTable {
		spec := d.spec(&specs)
		if d.lbSized && o.lbMapMax != 0 {
			spec = spec.Copy()
			spec.MaxEntries = o.lbMapMax
		}
		mp, err := openMap(d, spec, pinDir)
		if err == nil && pinDir != "" && !o.adopt && d.maglev {
			mp, err = replaceOtherInner(mp, spec, pinDir)
		}
		if err != nil {
			m.Close()
			return nil, err
		}
		*d.field(m) = mp
	}
	return m, nil
}

// replaceOtherInner replaces a pinned map of maps whose inner maps are
// not of spec's layout (the kernel does not say when it is opened, and
// the verifier checks the programs' reads against it): Maglev tables of
// another --bpf-lb-maglev-table-size. It asks the kernel, by putting an empty
// inner map of the layout at key 0, which no frontend has.
func replaceOtherInner(mp *ebpf.Map, spec *ebpf.MapSpec, pinDir string) (*ebpf.Map, error) {
	probe, err := ebpf.NewMap(spec.InnerMap)
	if err != nil {
		mp.Close()
		return nil, fmt.Errorf("map %s: inner map: %w", spec.Name, err)
	}
	defer probe.Close()
	key := make([]byte, spec.KeySize)
	err = mp.Put(key, probe)
	if err == nil {
		err = mp.Delete(key)
		if err != nil {
			mp.Close()
			return nil, fmt.Errorf("map %s: %w", spec.Name, err)
		}
		return mp, nil
	}
	if !errors.Is(err, unix.EINVAL) {
		mp.Close()
		return nil, fmt.Errorf("map %s: %w", spec.Name, err)
	}
	mp.Close()
	if err := os.Remove(filepath.Join(pinDir, spec.Name)); err != nil {
		return nil, fmt.Errorf("map %s: %w", spec.Name, err)
	}
	s := spec.Copy()
	return ebpf.NewMapWithOptions(s, ebpf.MapOptions{PinPath: pinDir})
}

// removeStalePins removes the pins of maps this datapath no longer has
// from pinDir.
func removeStalePins(pinDir string) error {
	for _, name := range stalePins {
		if err := os.Remove(filepath.Join(pinDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale pin %s: %w", name, err)
		}
	}
	return nil
}

func openMap(d mapDef, s *ebpf.MapSpec, pinDir string) (*ebpf.Map, error) {
	s = s.Copy()
	if pinDir == "" {
		s.Pinning = ebpf.PinNone
	}
	mp, err := ebpf.NewMapWithOptions(s, ebpf.MapOptions{PinPath: pinDir})
	if errors.Is(err, ebpf.ErrMapIncompatible) && d.disposable {
		// Pinned by an older datapath with another layout: its
		// content may be lost, so a new map replaces it.
		if err = os.Remove(filepath.Join(pinDir, s.Name)); err == nil {
			mp, err = ebpf.NewMapWithOptions(s, ebpf.MapOptions{PinPath: pinDir})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", s.Name, err)
	}
	return mp, nil
}

// Close releases the file descriptors; pinned maps stay.
func (m *Maps) Close() error {
	m.groups.invalidate()
	var errs []error
	for _, d := range mapTable {
		if mp := *d.field(m); mp != nil {
			errs = append(errs, mp.Close())
		}
	}
	return errors.Join(errs...)
}

// useIn makes the program object cs use these maps instead of its own:
// the options to load it with. Its specs take the maps' sizes, which the
// agent chose (WithLBMapMax, WithMaglevTableSize), and its Maglev table
// size constant the tables', which the verifier then holds its reads to.
// An object that includes only some of the headers that declare maps
// gets only those.
func (m *Maps) useIn(cs *ebpf.CollectionSpec) (*ebpf.CollectionOptions, error) {
	r := make(map[string]*ebpf.Map, len(mapTable))
	for _, d := range mapTable {
		s, ok := cs.Maps[d.name]
		if !ok {
			continue
		}
		mp := *d.field(m)
		s.MaxEntries = mp.MaxEntries()
		if d.maglev {
			s.InnerMap = m.maglevInner.Copy()
		}
		r[d.name] = mp
	}
	if v, ok := cs.Variables[lxcVarLB_MAGLEV_SIZE]; ok {
		if err := v.Set(m.maglevSize); err != nil {
			return nil, fmt.Errorf("set constant LB_MAGLEV_SIZE: %w", err)
		}
	}
	return &ebpf.CollectionOptions{MapReplacements: r}, nil
}

// ErrNotPinned is returned by OpenPinnedMaps when a map is not pinned.
var ErrNotPinned = errors.New("map not pinned")

// OpenPinnedMaps opens the maps a running (or stopped) node pinned in
// pinDir, for tools that read the datapath beside the agent. Unlike
// OpenMaps it creates nothing: a tool pointed at the wrong directory must
// not leave empty maps there that a starting agent would then adopt.
func OpenPinnedMaps(pinDir string) (*Maps, error) {
	for _, d := range mapTable {
		name := d.name
		if _, err := os.Stat(filepath.Join(pinDir, name)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s in %s: %w", name, pinDir, ErrNotPinned)
			}
			return nil, fmt.Errorf("pinned map %s: %w", name, err)
		}
	}
	// The service maps are as large as the agent made them.
	svc, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "cilium_lb4_services"), nil)
	if err != nil {
		return nil, fmt.Errorf("pinned map cilium_lb4_services: %w", err)
	}
	defer svc.Close()
	return OpenMaps(pinDir, WithLBMapMax(svc.MaxEntries()), func(o *mapOptions) { o.adopt = true })
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
