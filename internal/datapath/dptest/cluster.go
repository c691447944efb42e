// Package dptest builds small clusters out of network namespaces: an
// underlay bridge, nodes on it and pods on the nodes, wired either by the
// datapath's Go API or, as a baseline, by plain kernel routing. The
// privileged tests and bench/datapath share it. It needs root.
package dptest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Options shape a cluster.
type Options struct {
	Mode spec.RoutingMode
	// Plain wires pods by kernel routing only, with no BPF at all.
	Plain bool
	// PolicyIngress and PolicyEgress turn on enforcement for every pod.
	PolicyIngress, PolicyEgress bool
	// Masquerade translates pod traffic to the world to the node address.
	Masquerade bool
	// World adds a host on the underlay that no ipcache knows: the world.
	World bool
	// LegacyTC attaches with tc filters instead of TCX links.
	LegacyTC bool
	// LegacyRouting routes leaving pod traffic through the stack.
	LegacyRouting bool
	// PodDevice is the kind of pair pods get ("" is veth).
	PodDevice podlink.Device
	// Traces are the datapath's traces of forwarded packets.
	Traces spec.Traces
	// MaglevTableSize is the slots of the nodes' Maglev tables (0: the
	// compiled size).
	MaglevTableSize uint32
	Nodes           int // default 2
	PodsPerNode     int // default 2
	Log             *slog.Logger
}

// WorldIP is the address of the world host when Options.World is set.
var WorldIP = netip.MustParseAddr("192.168.50.100")

// Cluster is a set of namespaces that Close removes again.
type Cluster struct {
	Nodes []*Node
	// WorldNS is the world host's namespace, when asked for.
	WorldNS  string
	opts     Options
	bpffs    string
	nsDir    string
	cleanups []func() error
}

// Node is a node namespace with its datapath (nil when Plain).
type Node struct {
	Name string
	NS   string // path of the network namespace
	IP   netip.Addr
	CIDR netip.Prefix
	DP   *datapath.Node
	// BPFFSDir holds the node's pins (maps/, links/), as an agent's
	// --bpf-root does; empty when Plain.
	BPFFSDir string
	Pods     []*Pod
	nl       *netlink.Handle
}

// Pod is a pod namespace with one device pair into its node.
type Pod struct {
	Name       string
	NS         string
	IP         netip.Addr
	ID         uint16
	Identity   identity.NumericIdentity
	Node       *Node
	HostDevice string
	MAC        net.HardwareAddr
}

const vxlanOverhead = 50

var seq atomic.Int64

// New builds the cluster. On error it removes whatever it made.
func New(o Options) (c *Cluster, err error) {
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = 2
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c = &Cluster{opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if !o.Plain {
		if err := c.mountBPFFS(); err != nil {
			return c, err
		}
	}
	underlay, err := c.newNS("u")
	if err != nil {
		return c, err
	}
	u, err := c.handle(underlay)
	if err != nil {
		return c, err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := u.LinkAdd(br); err != nil {
		return c, fmt.Errorf("bridge: %w", err)
	}
	if err := u.LinkSetUp(br); err != nil {
		return c, fmt.Errorf("bridge up: %w", err)
	}
	if o.World {
		if err := c.addWorld(u, br); err != nil {
			return c, err
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		n, err := c.addNode(u, br, i)
		if err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, c.wire()
}

// Close removes the cluster in reverse order of creation.
func (c *Cluster) Close() error {
	var errs []error
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, c.cleanups[i]())
	}
	c.cleanups = nil
	return errors.Join(errs...)
}

func (c *Cluster) onClose(f func() error) { c.cleanups = append(c.cleanups, f) }

// Pods lists every pod, node by node.
func (c *Cluster) Pods() []*Pod {
	var out []*Pod
	for _, n := range c.Nodes {
		out = append(out, n.Pods...)
	}
	return out
}

func (c *Cluster) mountBPFFS() error {
	dir, err := os.MkdirTemp("", "dptest-bpffs-")
	if err != nil {
		return fmt.Errorf("bpffs dir: %w", err)
	}
	c.onClose(func() error { return os.Remove(dir) })
	root, unmount, err := testnode.MountBPFFS(dir)
	if err != nil {
		return err
	}
	c.onClose(unmount)
	c.bpffs = root
	return nil
}

// newNS creates a network namespace held by a bind mount on a file in the
// cluster's own directory. Not /run/netns: a tool that later bind-mounts
// that directory over itself (ip netns does) would hide our mounts, and
// the namespaces would outlive the cluster.
func (c *Cluster) newNS(short string) (string, error) {
	if c.nsDir == "" {
		dir, err := os.MkdirTemp("", "dptest-netns-")
		if err != nil {
			return "", fmt.Errorf("netns dir: %w", err)
		}
		c.onClose(func() error { return os.Remove(dir) })
		c.nsDir = dir
	}
	path := filepath.Join(c.nsDir, fmt.Sprintf("%d-%s", seq.Add(1), short))
	remove, err := netnamespace.Create(path)
	if err != nil {
		return "", err
	}
	c.onClose(remove)
	return path, nil
}

func (c *Cluster) handle(path string) (*netlink.Handle, error) {
	h, err := netnamespace.Netlink(path)
	if err != nil {
		return nil, err
	}
	c.onClose(func() error { h.Close(); return nil })
	return h, nil
}

// veth makes a pair in from's namespace, moves the peer into the
// namespace at to and names it there. It returns the peer.
func veth(from *netlink.Handle, name, to string, toH *netlink.Handle, toName string, mtu int) (netlink.Link, error) {
	tmp := name + "p"
	if err := from.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, PeerName: tmp}); err != nil {
		return nil, fmt.Errorf("veth %s: %w", name, err)
	}
	peer, err := from.LinkByName(tmp)
	if err != nil {
		return nil, err
	}
	ns, err := netns.GetFromPath(to)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if err := from.LinkSetNsFd(peer, int(ns)); err != nil {
		return nil, fmt.Errorf("move %s: %w", tmp, err)
	}
	if peer, err = toH.LinkByName(tmp); err != nil {
		return nil, err
	}
	if err := toH.LinkSetName(peer, toName); err != nil {
		return nil, fmt.Errorf("rename %s: %w", tmp, err)
	}
	if peer, err = toH.LinkByName(toName); err != nil {
		return nil, err
	}
	if err := toH.LinkSetUp(peer); err != nil {
		return nil, err
	}
	l, err := from.LinkByName(name)
	if err != nil {
		return nil, err
	}
	return peer, from.LinkSetUp(l)
}

func hostNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 32)}
}

func (c *Cluster) addWorld(u *netlink.Handle, br *netlink.Bridge) error {
	var err error
	if c.WorldNS, err = c.newNS("world"); err != nil {
		return err
	}
	h, err := c.handle(c.WorldNS)
	if err != nil {
		return err
	}
	eth0, err := veth(u, "world", c.WorldNS, h, "eth0", 1500)
	if err != nil {
		return err
	}
	port, err := u.LinkByName("world")
	if err != nil {
		return err
	}
	if err := u.LinkSetMaster(port, br); err != nil {
		return fmt.Errorf("enslave world: %w", err)
	}
	if err := h.AddrAdd(eth0, &netlink.Addr{IPNet: hostNet(WorldIP, 24)}); err != nil {
		return fmt.Errorf("address world: %w", err)
	}
	return nil
}

// RouteFromWorld routes the world host's traffic to dst through the
// node at via, as a router in front of a cluster would.
func (c *Cluster) RouteFromWorld(dst netip.Prefix, via netip.Addr) error {
	h, err := c.handle(c.WorldNS)
	if err != nil {
		return err
	}
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	err = h.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: via.AsSlice(), Dst: hostNet(dst.Addr(), dst.Bits())})
	if err != nil {
		return fmt.Errorf("world route to %s: %w", dst, err)
	}
	return nil
}

func (c *Cluster) addNode(u *netlink.Handle, br *netlink.Bridge, i int) (*Node, error) {
	n := &Node{
		Name: fmt.Sprintf("node%d", i),
		IP:   netip.AddrFrom4([4]byte{192, 168, 50, byte(i)}),
		CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 10, byte(i), 0}), 24),
	}
	var err error
	if n.NS, err = c.newNS(n.Name); err != nil {
		return nil, err
	}
	if n.nl, err = c.handle(n.NS); err != nil {
		return nil, err
	}
	eth0, err := veth(u, n.Name, n.NS, n.nl, "eth0", 1500)
	if err != nil {
		return nil, err
	}
	port, err := u.LinkByName(n.Name)
	if err != nil {
		return nil, err
	}
	if err := u.LinkSetMaster(port, br); err != nil {
		return nil, fmt.Errorf("enslave %s: %w", n.Name, err)
	}
	if err := n.nl.AddrAdd(eth0, &netlink.Addr{IPNet: hostNet(n.IP, 24)}); err != nil {
		return nil, fmt.Errorf("address %s: %w", n.Name, err)
	}
	if c.opts.Plain {
		err = netnamespace.Do(n.NS, func() error {
			return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
		})
		if err != nil {
			return nil, fmt.Errorf("forwarding on %s: %w", n.Name, err)
		}
	} else if err := c.startDatapath(n); err != nil {
		return nil, err
	}
	mtu := 1500
	if c.opts.Mode == spec.Tunnel && !c.opts.Plain {
		mtu -= vxlanOverhead
	}
	for j := 1; j <= c.opts.PodsPerNode; j++ {
		p, err := c.addPod(n, i*10+j, mtu)
		if err != nil {
			return nil, err
		}
		n.Pods = append(n.Pods, p)
	}
	return n, nil
}

func (c *Cluster) startDatapath(n *Node) error {
	dir := filepath.Join(c.bpffs, n.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	dp, err := datapath.NewNode(datapath.Config{
		BPFFSDir: dir, NetNS: n.NS, NodeIPv4: n.IP, Uplink: "eth0", Mode: c.opts.Mode,
		Masquerade: c.opts.Masquerade, LegacyTC: c.opts.LegacyTC, LegacyRouting: c.opts.LegacyRouting,
		PodDevice: c.opts.PodDevice, Traces: c.opts.Traces, MaglevTableSize: c.opts.MaglevTableSize,
	}, c.opts.Log.With("node", n.Name))
	if err != nil {
		return err
	}
	if err := dp.Start(); err != nil {
		return errors.Join(fmt.Errorf("start datapath on %s: %w", n.Name, err), dp.Teardown())
	}
	c.onClose(dp.Teardown)
	n.DP, n.BPFFSDir = dp, dir
	return nil
}

func (c *Cluster) addPod(n *Node, id, mtu int) (*Pod, error) {
	p := &Pod{
		Name: fmt.Sprintf("pod%d", id), ID: uint16(id), Identity: identity.NumericIdentity(1000 + id), Node: n,
		IP:         netip.AddrFrom4([4]byte{10, 10, byte(id / 10), byte(id)}),
		HostDevice: fmt.Sprintf("lxc%d", id),
	}
	var err error
	if p.NS, err = c.newNS(p.Name); err != nil {
		return nil, err
	}
	link, err := podlink.Create(podlink.Link{
		NodeNetNS: n.NS, PodNetNS: p.NS, PodIfName: "eth0", HostIfName: p.HostDevice, IPv4: p.IP, MTU: mtu,
		Device: c.opts.PodDevice,
	})
	if err != nil {
		return nil, err
	}
	p.MAC = link.PodMAC
	if c.opts.Plain {
		route := &netlink.Route{LinkIndex: link.HostIfindex, Dst: hostNet(p.IP, 32), Scope: netlink.SCOPE_LINK}
		if err := n.nl.RouteAdd(route); err != nil {
			return nil, fmt.Errorf("route to %s: %w", p.Name, err)
		}
		return p, nil
	}
	return p, n.DP.UpsertEndpoint(spec.Endpoint{ID: p.ID, Identity: p.Identity, IPv4: p.IP, MAC: p.MAC,
		HostDevice: p.HostDevice, PolicyIngress: c.opts.PolicyIngress, PolicyEgress: c.opts.PolicyEgress})
}

// wire routes between nodes and, with the datapath, fills every ipcache
// as the agent would from CiliumEndpoints and CiliumNodes.
func (c *Cluster) wire() error {
	for _, n := range c.Nodes {
		for _, o := range c.Nodes {
			if o == n {
				continue
			}
			if c.opts.Plain {
				r := &netlink.Route{Dst: hostNet(o.CIDR.Addr(), o.CIDR.Bits()), Gw: o.IP.AsSlice()}
				if err := n.nl.RouteAdd(r); err != nil {
					return fmt.Errorf("route %s -> %s: %w", n.Name, o.Name, err)
				}
				continue
			}
			if err := n.DP.UpsertRemoteNode(spec.RemoteNode{IPv4: o.IP, PodCIDR: o.CIDR}); err != nil {
				return err
			}
		}
		if !c.opts.Plain {
			if err := n.DP.Maps().SyncIPCache(c.IPCacheFor(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// IPCacheFor is the ipcache node n should hold.
func (c *Cluster) IPCacheFor(n *Node) map[netip.Prefix]spec.IPCacheEntry {
	desired := map[netip.Prefix]spec.IPCacheEntry{}
	for _, o := range c.Nodes {
		nodeID := identity.RemoteNode
		if o == n {
			nodeID = identity.Host
		}
		desired[netip.PrefixFrom(o.IP, 32)] = spec.IPCacheEntry{Identity: nodeID}
		for _, p := range o.Pods {
			e := spec.IPCacheEntry{Identity: p.Identity}
			if o != n {
				e.TunnelEndpoint = o.IP
			}
			desired[netip.PrefixFrom(p.IP, 32)] = e
		}
	}
	return desired
}
