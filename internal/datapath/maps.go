package datapath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Maps are the node's shared BPF maps. Every program object of the node
// is loaded against these same maps.
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

// EndpointEntry is what the datapath knows about a local endpoint.
type EndpointEntry struct {
	ID       uint16
	Identity identity.NumericIdentity
	IPv4     netip.Addr
	// MAC is the pod's own interface; HostMAC and HostIfindex belong to
	// the host-side veth that packets for the pod are redirected to.
	MAC           net.HardwareAddr
	HostMAC       net.HardwareAddr
	HostIfindex   int
	PolicyIngress bool
	PolicyEgress  bool
}

func (e EndpointEntry) info() EndpointInfo {
	v := EndpointInfo{Ifindex: uint32(e.HostIfindex), Identity: uint32(e.Identity), EpId: e.ID}
	if e.PolicyIngress {
		v.Flags |= epFlagIngressEnforce
	}
	if e.PolicyEgress {
		v.Flags |= epFlagEgressEnforce
	}
	copy(v.Mac[:], e.MAC)
	copy(v.NodeMac[:], e.HostMAC)
	return v
}

// UpsertEndpoint writes the endpoint's entry.
func (m *Maps) UpsertEndpoint(e EndpointEntry) error {
	k, err := endpointKey4(e.IPv4)
	if err != nil {
		return err
	}
	v := e.info()
	if err := m.Endpoints.Put(&k, &v); err != nil {
		return fmt.Errorf("put endpoint %s: %w", e.IPv4, err)
	}
	return nil
}

// DeleteEndpoint removes the endpoint's entry; a missing one is no error.
func (m *Maps) DeleteEndpoint(addr netip.Addr) error {
	k, err := endpointKey4(addr)
	if err != nil {
		return err
	}
	if err := m.Endpoints.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete endpoint %s: %w", addr, err)
	}
	return nil
}

// UpsertIPCache writes one prefix.
func (m *Maps) UpsertIPCache(p netip.Prefix, e spec.IPCacheEntry) error {
	k, err := ipcacheKey(p)
	if err != nil {
		return err
	}
	v := IPCacheInfo{Identity: uint32(e.Identity), TunnelIpv4: be32(e.TunnelEndpoint)}
	if err := m.IPCache.Put(&k, &v); err != nil {
		return fmt.Errorf("put ipcache %s: %w", p, markFull(err))
	}
	return nil
}

// DeleteIPCache removes one prefix; a missing one is no error.
func (m *Maps) DeleteIPCache(p netip.Prefix) error {
	k, err := ipcacheKey(p)
	if err != nil {
		return err
	}
	if err := m.IPCache.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete ipcache %s: %w", p, err)
	}
	return nil
}

// SyncIPCache makes the ipcache equal to desired: it writes what differs
// and prunes what is not desired. Running it twice changes nothing.
func (m *Maps) SyncIPCache(desired map[netip.Prefix]spec.IPCacheEntry) error {
	current := map[netip.Prefix]IPCacheInfo{}
	var k IPCacheKey
	var v IPCacheInfo
	it := m.IPCache.Iterate()
	for it.Next(&k, &v) {
		current[prefixOfIPCacheKey(k)] = v
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate ipcache: %w", err)
	}
	var errs []error
	for p := range current {
		if _, ok := desired[p.Masked()]; !ok {
			errs = append(errs, m.DeleteIPCache(p))
		}
	}
	for p, e := range desired {
		want := IPCacheInfo{Identity: uint32(e.Identity), TunnelIpv4: be32(e.TunnelEndpoint)}
		if cur, ok := current[p.Masked()]; ok && cur == want {
			continue
		}
		errs = append(errs, m.UpsertIPCache(p, e))
	}
	return errors.Join(errs...)
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
