package datapath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/inns"
	"github.com/cilium-go/cilium/internal/podlink"
)

// Config is one node's datapath configuration.
type Config struct {
	// BPFFSDir is a directory on a bpffs that holds this node's pins:
	// maps/ and links/.
	BPFFSDir string
	// NetNS is the path of the node's network namespace; empty means the
	// caller's own.
	NetNS string
	// NodeIPv4 is the node's address on Uplink.
	NodeIPv4 netip.Addr
	// Uplink is the device that connects the node to the other nodes.
	Uplink string
	Mode   spec.RoutingMode
	// TunnelDevice and TunnelPort name the VXLAN device in tunnel mode.
	TunnelDevice string
	TunnelPort   int
	// Trace emits a trace event for every forwarded packet.
	Trace bool
	// Masquerade translates pod traffic to the world (addresses outside
	// the ipcache) to NodeIPv4, in BPF. Cilium enables it by default.
	Masquerade bool
	// LegacyTC attaches with tc filters instead of TCX links. Start falls
	// back to it by itself when the kernel lacks TCX.
	LegacyTC bool
	// LegacyRouting routes pod traffic that leaves the node through the
	// stack instead of redirecting it in BPF (Cilium's legacy host routing).
	LegacyRouting bool
	// PodDevice is the kind of pair new pods get ("" is veth); the CNI
	// plugin creates it. Endpoints are programmed by the kind their
	// device is, so pods made before a change keep working.
	PodDevice podlink.Device
}

// DefaultTunnelDevice and DefaultTunnelPort are Cilium's defaults.
const (
	DefaultTunnelDevice = "cilium_vxlan"
	DefaultTunnelPort   = 8472
	vxlanOverhead       = 50
)

func (c *Config) validate() error {
	if c.BPFFSDir == "" {
		return errors.New("datapath config: BPFFSDir is required")
	}
	if !c.NodeIPv4.Is4() {
		return errors.New("datapath config: NodeIPv4 must be an IPv4 address")
	}
	if c.Uplink == "" {
		return errors.New("datapath config: Uplink is required")
	}
	if c.Mode != spec.Native && c.Mode != spec.Tunnel {
		return fmt.Errorf("datapath config: unknown routing mode %d", c.Mode)
	}
	// The field is typed already: an empty value means veth, anything
	// else must be one of podlink's constants.
	switch c.PodDevice {
	case "":
		c.PodDevice = podlink.DeviceVeth
	case podlink.DeviceVeth, podlink.DeviceNetkit:
	default:
		return fmt.Errorf("datapath config: unknown pod device %q (want %s or %s)",
			c.PodDevice, podlink.DeviceVeth, podlink.DeviceNetkit)
	}
	if c.PodDevice == podlink.DeviceNetkit && c.LegacyTC {
		return errors.New("datapath config: netkit pod devices need TCX, not legacy tc")
	}
	if c.TunnelDevice == "" {
		c.TunnelDevice = DefaultTunnelDevice
	}
	if c.TunnelPort == 0 {
		c.TunnelPort = DefaultTunnelPort
	}
	return nil
}

// Node is the datapath of one node: its maps, its device programs and the
// endpoints it serves. Its methods are not safe for concurrent use; the
// maps (Maps) are.
type Node struct {
	cfg    Config
	log    *slog.Logger
	nl     *netlink.Handle
	maps   *Maps
	consts NodeConstants
	// stopWatch ends the route watch that keeps the FIB cache honest.
	stopWatch context.CancelFunc
}

// NewNode checks cfg; it touches nothing in the kernel until Start.
func NewNode(cfg Config, log *slog.Logger) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, log: log}, nil
}

// PodDevice is the kind of pair new pods of this node get.
func (n *Node) PodDevice() podlink.Device { return n.cfg.PodDevice }

// Maps are the node's maps; valid after Start.
func (n *Node) Maps() *Maps { return n.maps }

func (n *Node) mapsDir() string  { return filepath.Join(n.cfg.BPFFSDir, "maps") }
func (n *Node) linksDir() string { return filepath.Join(n.cfg.BPFFSDir, "links") }

// Start opens (or creates) the pinned maps, prepares the node's devices
// and attaches the device programs. Starting again after a restart reuses
// pins and updates links in place.
func (n *Node) Start() error {
	var st unix.Statfs_t
	if err := unix.Statfs(n.cfg.BPFFSDir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", n.cfg.BPFFSDir, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not on a bpf filesystem", n.cfg.BPFFSDir)
	}
	// Pods of a netkit node get netkit pairs from the CNI plugin: a
	// kernel without them must stop the agent here, not every pod's ADD.
	if n.cfg.PodDevice == podlink.DeviceNetkit {
		if err := podlink.ProbeNetkit(n.cfg.NetNS); err != nil {
			return fmt.Errorf("netkit pod devices: %w", err)
		}
	}
	for _, d := range []string{n.mapsDir(), n.linksDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	nl, err := n.netlinkHandle()
	if err != nil {
		return err
	}
	n.nl = nl
	if n.maps, err = OpenMaps(n.mapsDir()); err != nil {
		return err
	}
	if n.stopWatch != nil {
		n.stopWatch()
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := watchRoutes(ctx, n.cfg.NetNS, n.maps, n.log); err != nil {
		cancel()
		return err
	}
	n.stopWatch = cancel
	uplink, err := n.nl.LinkByName(n.cfg.Uplink)
	if err != nil {
		return fmt.Errorf("uplink %s: %w", n.cfg.Uplink, err)
	}
	n.consts = NodeConstants{NodeIPv4: n.cfg.NodeIPv4, Mode: n.cfg.Mode, Trace: n.cfg.Trace,
		Masquerade: n.cfg.Masquerade, LegacyRouting: n.cfg.LegacyRouting}
	if n.cfg.Masquerade {
		ephemeral, err := EphemeralPorts(n.cfg.NetNS)
		if err != nil {
			return err
		}
		n.consts.MasqueradePorts = MasqueradePortRange(ephemeral)
		n.log.Info("masquerading", "ports", n.consts.MasqueradePorts, "nodeEphemeralPorts", ephemeral)
	}
	var tunnel netlink.Link
	if n.cfg.Mode == spec.Tunnel {
		if tunnel, err = n.ensureVXLAN(uplink.Attrs().MTU - vxlanOverhead); err != nil {
			return err
		}
		n.consts.TunnelIfindex = tunnel.Attrs().Index
	}
	progs, err := LoadNodePrograms(n.maps, n.consts)
	if err != nil {
		return err
	}
	defer progs.Close()
	err = inns.Do(n.cfg.NetNS, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	if err := n.attach(n.linkPin("netdev", n.cfg.Uplink, "ingress"), uplink.Attrs().Index,
		progs.FromNetdev, ebpf.AttachTCXIngress); err != nil {
		return err
	}
	// Only legacy routing masquerades at the uplink; a previous run's
	// link goes when the configuration changed.
	egressPin := n.linkPin("netdev", n.cfg.Uplink, "egress")
	if n.cfg.Masquerade && n.cfg.LegacyRouting {
		err = n.attach(egressPin, uplink.Attrs().Index, progs.ToNetdev, ebpf.AttachTCXEgress)
	} else {
		err = n.detach(egressPin, n.cfg.Uplink, ebpf.AttachTCXEgress)
	}
	if err != nil {
		return err
	}
	if tunnel == nil {
		return nil
	}
	idx := tunnel.Attrs().Index
	if err := n.attach(n.linkPin("overlay", n.cfg.TunnelDevice, "ingress"), idx,
		progs.FromOverlay, ebpf.AttachTCXIngress); err != nil {
		return err
	}
	return n.attach(n.linkPin("overlay", n.cfg.TunnelDevice, "egress"), idx,
		progs.ToOverlay, ebpf.AttachTCXEgress)
}

// attach hooks prog to a device of the node: a pinned TCX or netkit link,
// or a tc filter when configured or when the kernel has no TCX.
func (n *Node) attach(pin string, ifindex int, prog *ebpf.Program, at ebpf.AttachType) error {
	if isNetkit(at) {
		return inns.Do(n.cfg.NetNS, func() error { return attachTCX(pin, ifindex, prog, at) })
	}
	if !n.cfg.LegacyTC {
		err := inns.Do(n.cfg.NetNS, func() error { return attachTCX(pin, ifindex, prog, at) })
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
		n.log.Info("kernel without TCX: attaching with tc filters")
		n.cfg.LegacyTC = true
	}
	return attachLegacyTC(n.nl, ifindex, prog, at)
}

// detach undoes attach; a device already gone is no error. The pin goes
// in any case: netkit devices are attached by links even with tc filters
// elsewhere.
func (n *Node) detach(pin string, device string, at ebpf.AttachType) error {
	err := detachTCX(pin)
	if !n.cfg.LegacyTC || err != nil {
		return err
	}
	l, err := n.nl.LinkByName(device)
	if err != nil {
		return nil // the filter went with its device
	}
	return detachLegacyTC(n.nl, l.Attrs().Index, at)
}

func (n *Node) linkPin(kind, name, dir string) string {
	return filepath.Join(n.linksDir(), kind+"_"+name+"_"+dir)
}

func (n *Node) netlinkHandle() (*netlink.Handle, error) {
	return inns.Netlink(n.cfg.NetNS)
}

// ensureVXLAN creates the VXLAN device in external (collect metadata)
// mode: one device for all peers, the tunnel key chosen per packet. It
// does not resolve neighbours: programs write the MACs.
func (n *Node) ensureVXLAN(mtu int) (netlink.Link, error) {
	name := n.cfg.TunnelDevice
	l, err := n.nl.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if !errors.As(err, &notFound) {
			return nil, fmt.Errorf("look up %s: %w", name, err)
		}
		vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, FlowBased: true, Port: n.cfg.TunnelPort}
		if err := n.nl.LinkAdd(vx); err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		if l, err = n.nl.LinkByName(name); err != nil {
			return nil, fmt.Errorf("look up %s: %w", name, err)
		}
	}
	if err := n.nl.LinkSetARPOff(l); err != nil {
		return nil, fmt.Errorf("arp off on %s: %w", name, err)
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("set %s up: %w", name, err)
	}
	return l, nil
}

// UpsertEndpoint loads the endpoint's programs with its constants,
// attaches them to its host device (replacing older ones atomically),
// publishes it in the endpoint map and routes its address to it. On a
// veth, from-container runs at the host side's ingress and to-container
// at its egress; on a netkit pair, from-container runs as the pod's side
// transmits and to-container as the node's side does.
func (n *Node) UpsertEndpoint(ep spec.Endpoint) error {
	host, err := n.nl.LinkByName(ep.HostDevice)
	if err != nil {
		return fmt.Errorf("endpoint %d device %s: %w", ep.ID, ep.HostDevice, err)
	}
	fromAt, toAt := ebpf.AttachTCXIngress, ebpf.AttachTCXEgress
	nk, netkit := host.(*netlink.Netkit)
	if netkit {
		if !nk.IsPrimary() {
			return fmt.Errorf("endpoint %d device %s: a netkit peer, want the primary", ep.ID, ep.HostDevice)
		}
		fromAt, toAt = ebpf.AttachNetkitPeer, ebpf.AttachNetkitPrimary
	}
	progs, err := LoadEndpointPrograms(n.maps, EndpointConstants{
		NodeConstants: n.consts, ID: ep.ID, Identity: ep.Identity, IPv4: ep.IPv4,
		PolicyIngress: ep.PolicyIngress, PolicyEgress: ep.PolicyEgress, Netkit: netkit,
	})
	if err != nil {
		return err
	}
	defer progs.Close()
	idx := host.Attrs().Index
	if err := n.attach(n.endpointPin(ep.ID, "ingress"), idx, progs.FromContainer, fromAt); err != nil {
		return fmt.Errorf("endpoint %d: %w", ep.ID, err)
	}
	if err := n.attach(n.endpointPin(ep.ID, "egress"), idx, progs.ToContainer, toAt); err != nil {
		return fmt.Errorf("endpoint %d: %w", ep.ID, err)
	}
	if err := n.maps.UpsertEndpoint(EndpointEntry{
		ID: ep.ID, Identity: ep.Identity, IPv4: ep.IPv4, MAC: ep.MAC,
		HostMAC: host.Attrs().HardwareAddr, HostIfindex: idx,
		PolicyIngress: ep.PolicyIngress, PolicyEgress: ep.PolicyEgress,
	}); err != nil {
		return err
	}
	route := &netlink.Route{LinkIndex: idx, Dst: hostPrefix(ep.IPv4), Scope: netlink.SCOPE_LINK}
	if err := n.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("route to endpoint %d: %w", ep.ID, err)
	}
	n.log.Debug("endpoint programmed", "id", ep.ID, "identity", ep.Identity, "ipv4", ep.IPv4)
	return nil
}

// DeleteEndpoint detaches the endpoint's programs and forgets it and its
// policy. The host device may be gone already (CNI DEL removed it).
func (n *Node) DeleteEndpoint(ep spec.Endpoint) error {
	errs := []error{
		n.detach(n.endpointPin(ep.ID, "ingress"), ep.HostDevice, ebpf.AttachTCXIngress),
		n.detach(n.endpointPin(ep.ID, "egress"), ep.HostDevice, ebpf.AttachTCXEgress),
		n.maps.DeleteEndpoint(ep.IPv4),
		n.maps.SetPolicy(ep.ID, nil),
	}
	// The scope must match the route's, or the kernel finds nothing.
	route := &netlink.Route{Dst: hostPrefix(ep.IPv4), Scope: netlink.SCOPE_LINK}
	if err := n.nl.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) {
		errs = append(errs, fmt.Errorf("delete route to endpoint %d: %w", ep.ID, err))
	}
	return errors.Join(errs...)
}

// PruneEndpoints forgets every endpoint that is not in keep: their
// links, map entries and policy. An agent calls it after a restart, once
// it has programmed the endpoints it still has.
func (n *Node) PruneEndpoints(keep []spec.Endpoint) error {
	kept := map[uint16]bool{}
	for _, ep := range keep {
		kept[ep.ID] = true
	}
	var stale []spec.Endpoint
	var k EndpointKey
	var v EndpointInfo
	it := n.maps.Endpoints.Iterate()
	for it.Next(&k, &v) {
		if !kept[v.EpId] && k.Family == afInet {
			stale = append(stale, spec.Endpoint{ID: v.EpId, IPv4: netip.AddrFrom4([4]byte(k.Addr[:4]))})
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate endpoints: %w", err)
	}
	var errs []error
	for _, ep := range stale {
		if l, err := n.nl.LinkByIndex(int(n.endpointIfindex(ep.IPv4))); err == nil {
			ep.HostDevice = l.Attrs().Name
		}
		errs = append(errs, n.DeleteEndpoint(ep))
	}
	if !n.cfg.LegacyTC {
		errs = append(errs, n.pruneLinkPins(kept))
	}
	return errors.Join(errs...)
}

func (n *Node) endpointIfindex(a netip.Addr) uint32 {
	k, err := endpointKey4(a)
	if err != nil {
		return 0
	}
	var v EndpointInfo
	if n.maps.Endpoints.Lookup(&k, &v) != nil {
		return 0
	}
	return v.Ifindex
}

// pruneLinkPins removes endpoint links whose endpoint is not kept, even
// those whose map entry is already gone.
func (n *Node) pruneLinkPins(kept map[uint16]bool) error {
	entries, err := os.ReadDir(n.linksDir())
	if err != nil {
		return fmt.Errorf("read %s: %w", n.linksDir(), err)
	}
	var errs []error
	for _, e := range entries {
		var id uint16
		var dir string
		if _, err := fmt.Sscanf(e.Name(), "lxc_%d_%s", &id, &dir); err != nil || kept[id] {
			continue
		}
		errs = append(errs, detachTCX(filepath.Join(n.linksDir(), e.Name())))
	}
	return errors.Join(errs...)
}

func (n *Node) endpointPin(id uint16, dir string) string {
	return filepath.Join(n.linksDir(), fmt.Sprintf("lxc_%d_%s", id, dir))
}

func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// UpsertRemoteNode routes the node's pod CIDR: via the node in native
// mode, into the VXLAN device in tunnel mode (where the node's own traffic
// gets its tunnel key from the ipcache). Pod traffic does not need these
// routes in tunnel mode; the node's own does.
func (n *Node) UpsertRemoteNode(r spec.RemoteNode) error {
	dst := &net.IPNet{IP: r.PodCIDR.Masked().Addr().AsSlice(), Mask: net.CIDRMask(r.PodCIDR.Bits(), 32)}
	route := &netlink.Route{Dst: dst}
	if n.cfg.Mode == spec.Tunnel {
		route.LinkIndex = n.consts.TunnelIfindex
		route.Scope = netlink.SCOPE_LINK
	} else {
		uplink, err := n.nl.LinkByName(n.cfg.Uplink)
		if err != nil {
			return fmt.Errorf("uplink %s: %w", n.cfg.Uplink, err)
		}
		route.LinkIndex = uplink.Attrs().Index
		route.Gw = r.IPv4.AsSlice()
	}
	if err := n.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("route to %s via %s: %w", r.PodCIDR, r.IPv4, err)
	}
	// The watch sees the change too, later: cached answers must not
	// outlive this call.
	return n.maps.InvalidateRoutes()
}

// DeleteRemoteNode removes the route to its pod CIDR.
func (n *Node) DeleteRemoteNode(r spec.RemoteNode) error {
	dst := &net.IPNet{IP: r.PodCIDR.Masked().Addr().AsSlice(), Mask: net.CIDRMask(r.PodCIDR.Bits(), 32)}
	route := &netlink.Route{Dst: dst, Scope: netlink.SCOPE_UNIVERSE}
	if n.cfg.Mode == spec.Tunnel {
		route.Scope = netlink.SCOPE_LINK
	}
	if err := n.nl.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route to %s: %w", r.PodCIDR, err)
	}
	return n.maps.InvalidateRoutes()
}

// Close releases file descriptors; pinned maps and links keep the
// datapath running without the agent.
func (n *Node) Close() error {
	var err error
	if n.stopWatch != nil {
		n.stopWatch()
		n.stopWatch = nil
	}
	if n.maps != nil {
		err = n.maps.Close()
		n.maps = nil
	}
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	return err
}

// Teardown removes everything Start and the endpoints made: links, the
// VXLAN device and the pins. Running it twice is harmless.
func (n *Node) Teardown() error {
	var errs []error
	if n.nl != nil && n.cfg.LegacyTC {
		errs = append(errs, n.detach("", n.cfg.Uplink, ebpf.AttachTCXIngress),
			n.detach("", n.cfg.Uplink, ebpf.AttachTCXEgress))
	}
	if n.nl != nil && n.cfg.Mode == spec.Tunnel {
		if l, err := n.nl.LinkByName(n.cfg.TunnelDevice); err == nil {
			errs = append(errs, n.nl.LinkDel(l))
		}
	}
	errs = append(errs, n.Close())
	for _, d := range []string{n.linksDir(), n.mapsDir()} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
