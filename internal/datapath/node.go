package datapath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
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
	// Traces are the trace events of forwarded packets.
	Traces spec.Traces
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
	// SocketLB balances the services of the processes in CgroupRoot at
	// their sockets (connect, sendmsg): Cilium's bpf-lb-sock.
	SocketLB bool
	// CgroupRoot is the cgroup v2 directory whose processes SocketLB
	// serves: the node's own. Its programs reach the processes of its
	// whole subtree, in whatever network namespace they run.
	CgroupRoot string
	// LBMapMax sizes the service maps; 0 keeps the compiled size.
	LBMapMax uint32
	// PolicyMapMax sizes each endpoint's policy map; 0 keeps the
	// compiled size.
	PolicyMapMax uint32
	// NodePorts is the NodePort range, which source translation keeps
	// out of its ports; zero: DefaultNodePorts.
	NodePorts PortRange
	// MaglevTableSize is the Maglev tables' slots (0 keeps the compiled
	// size), and MaglevSeed the cluster's seed of the flow hash that
	// picks one.
	MaglevTableSize uint32
	MaglevSeed      uint32
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
	if c.SocketLB && c.CgroupRoot == "" {
		return errors.New("datapath config: SocketLB needs CgroupRoot")
	}
	if c.CgroupRoot != "" && !filepath.IsAbs(c.CgroupRoot) {
		return fmt.Errorf("datapath config: CgroupRoot %q is not an absolute path", c.CgroupRoot)
	}
	if c.TunnelDevice == "" {
		c.TunnelDevice = DefaultTunnelDevice
	}
	if c.TunnelPort == 0 {
		c.TunnelPort = DefaultTunnelPort
	}
	if c.NodePorts == (PortRange{}) {
		c.NodePorts = DefaultNodePorts
	}
	return nil
}

// Node is the datapath of one node: its maps, its device programs and the
// endpoints it serves. Its methods are safe for concurrent use, as the
// agent's reconcilers and jobs (endpoints, remote-node routes, Services'
// sockets, the API) share one Node: they run one at a time, and Maps
// never waits for them.
type Node struct {
	log *slog.Logger

	// mu serializes the methods, and guards cfg (attach may fall back
	// to tc filters) and the state that Start makes and Close drops:
	// the netlink handle, the constants and the route watch. One lock
	// for all is simple and costs little, since the one slow step, an
	// endpoint's programs loading, runs without it (UpsertEndpoint).
	mu        sync.Mutex
	cfg       Config
	nl        *netlink.Handle
	consts    NodeConstants
	stopWatch func() // ends the route watch that keeps the FIB cache honest, and waits for it

	// maps is set under mu but read without it (Maps), so that the
	// maps' many users never wait for an endpoint's programs to load.
	maps atomic.Pointer[Maps]
	// loads: endpoints' programs load under its read lock, without mu;
	// close takes it to write, so that the maps a load binds stay open
	// until it is done (the number of a closed descriptor is reused).
	loads sync.RWMutex
}

// ErrNotStarted is returned by the methods that need the kernel's state
// before Start or after Close.
var ErrNotStarted = errors.New("datapath not started")

// NewNode checks cfg; it touches nothing in the kernel until Start.
func NewNode(cfg Config, log *slog.Logger) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, log: log}, nil
}

// PodDevice is the kind of pair new pods of this node get.
func (n *Node) PodDevice() podlink.Device {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg.PodDevice
}

// Maps are the node's maps: nil before Start and after Close. They stay
// valid until Close, which closes them: users stop using them first (in
// the agent, jobs stop before the datapath does).
func (n *Node) Maps() *Maps { return n.maps.Load() }

func (n *Node) mapsDir() string  { return filepath.Join(n.cfg.BPFFSDir, "maps") }
func (n *Node) linksDir() string { return filepath.Join(n.cfg.BPFFSDir, "links") }

// Start opens (or creates) the pinned maps, prepares the node's devices
// and attaches the device programs. Starting again after a restart reuses
// pins and updates links in place.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
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
	maps, err := OpenMaps(n.mapsDir(), WithLBMapMax(n.cfg.LBMapMax), WithPolicyMapMax(n.cfg.PolicyMapMax),
		WithMaglevTableSize(n.cfg.MaglevTableSize))
	if err != nil {
		return err
	}
	n.maps.Store(maps)
	if err := removeStalePins(n.mapsDir()); err != nil {
		return err
	}
	if n.stopWatch != nil {
		n.stopWatch()
	}
	ctx, cancel := context.WithCancel(context.Background())
	watching, err := watchRoutes(ctx, n.cfg.NetNS, maps, n.log)
	if err != nil {
		cancel()
		return err
	}
	n.stopWatch = func() { cancel(); <-watching }
	uplink, err := n.nl.LinkByName(n.cfg.Uplink)
	if err != nil {
		return fmt.Errorf("uplink %s: %w", n.cfg.Uplink, err)
	}
	n.consts = NodeConstants{NodeIPv4: n.cfg.NodeIPv4, Mode: n.cfg.Mode, Traces: n.cfg.Traces,
		Masquerade: n.cfg.Masquerade, LegacyRouting: n.cfg.LegacyRouting, MaglevSeed: n.cfg.MaglevSeed}
	// Masquerading and the SNAT of NodePort flows to remote backends
	// (which runs whether or not pods are masqueraded) share the range.
	ephemeral, err := EphemeralPorts(n.cfg.NetNS)
	if err != nil {
		return err
	}
	n.consts.MasqueradePorts = MasqueradePortRange(ephemeral, n.cfg.NodePorts)
	n.consts.NodePorts = n.cfg.NodePorts
	n.log.Info("source translation", "masquerade", n.cfg.Masquerade, "ports", n.consts.MasqueradePorts,
		"node-ephemeral-ports", ephemeral)
	var tunnel netlink.Link
	if n.cfg.Mode == spec.Tunnel {
		if tunnel, err = n.ensureVXLAN(uplink.Attrs().MTU - vxlanOverhead); err != nil {
			return err
		}
		n.consts.TunnelIfindex = tunnel.Attrs().Index
	}
	if err := n.ensureHostDevices(uplink.Attrs().MTU); err != nil {
		return err
	}
	progs, err := LoadNodePrograms(maps, n.consts)
	if err != nil {
		return err
	}
	defer progs.Close()
	err = netnamespace.Do(n.cfg.NetNS, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	if err := n.ensureProxyRouting(); err != nil {
		return err
	}
	if err := n.attachDevices(progs, uplink, tunnel); err != nil {
		return err
	}
	// A previous run's socket programs go when the configuration no
	// longer asks for them.
	if n.cfg.SocketLB {
		return n.attachSocketLB(n.cfg.CgroupRoot)
	}
	return n.detachSocketLB()
}

// Close releases file descriptors; pinned maps and links keep the
// datapath running without the agent.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.close()
}

func (n *Node) close() error {
	var err error
	// The watch uses the maps: it must have ended before they close.
	if n.stopWatch != nil {
		n.stopWatch()
		n.stopWatch = nil
	}
	if maps := n.maps.Swap(nil); maps != nil {
		n.loads.Lock()
		err = maps.Close()
		n.loads.Unlock()
	}
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	return err
}

// Teardown removes everything Start and the endpoints made: links, the
// VXLAN device, the host devices and the pins. Running it twice is harmless.
func (n *Node) Teardown() error {
	n.mu.Lock()
	defer n.mu.Unlock()
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
	if n.nl != nil {
		if l, err := n.nl.LinkByName(HostDevice); err == nil { // its peer goes with it
			errs = append(errs, n.nl.LinkDel(l))
		}
		errs = append(errs, n.removeProxyRouting())
	}
	errs = append(errs, n.detachSocketLB(), n.close())
	for _, d := range []string{n.linksDir(), n.mapsDir()} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
