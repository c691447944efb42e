package datapath

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A two-node cluster in network namespaces, wired by this package's API:
// an underlay namespace with a bridge, two node namespaces on it, and two
// pod namespaces per node.
type testCluster struct {
	t     *testing.T
	mode  RoutingMode
	nodes []*testNode
}

type testNode struct {
	name string
	ns   string
	ip   netip.Addr
	cidr netip.Prefix
	dp   *Node
	pods []*testPod
}

type testPod struct {
	name     string
	ns       string
	ip       netip.Addr
	id       uint16
	identity uint32
	node     *testNode
	host     string // host-side veth in the node
	mac      net.HardwareAddr
}

const gatewayIP = "169.254.1.1"

var nsSeq int

// newTestNS creates a named network namespace (so that its path works
// like a lab node's) and deletes it when the test ends.
func newTestNS(t *testing.T, short string) string {
	t.Helper()
	nsSeq++
	name := fmt.Sprintf("cgdp-%d-%d-%s", os.Getpid(), nsSeq, short)
	err := inThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		ns, err := netns.NewNamed(name)
		if err != nil {
			return fmt.Errorf("create netns %s: %w", name, err)
		}
		ns.Close()
		return netns.Set(orig)
	})
	must(t, err)
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	path := filepath.Join("/run/netns", name)
	must(t, inNetNS(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}))
	return path
}

// inThread runs fn on a locked thread that is discarded afterwards, for
// calls that switch the thread's namespace themselves.
func inThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		done <- fn()
	}()
	return <-done
}

func nlAt(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	must(t, err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	must(t, err)
	t.Cleanup(h.Close)
	return h
}

// mountBPFFS gives the test its own bpffs, so pins never meet another
// test's or a lab's.
func mountBPFFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must(t, unix.Mount("bpffs", dir, "bpf", 0, ""))
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// vethInto makes a veth pair in the namespace at from, moves the peer to
// the namespace at to, and names it there.
func vethInto(t *testing.T, from *netlink.Handle, name string, to string, toHandle *netlink.Handle, toName string, mtu int) netlink.Link {
	t.Helper()
	tmp := name + "p"
	must(t, from.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, PeerName: tmp}))
	peer, err := from.LinkByName(tmp)
	must(t, err)
	ns, err := netns.GetFromPath(to)
	must(t, err)
	defer ns.Close()
	must(t, from.LinkSetNsFd(peer, int(ns)))
	peer, err = toHandle.LinkByName(tmp)
	must(t, err)
	must(t, toHandle.LinkSetName(peer, toName))
	must(t, toHandle.LinkSetMTU(peer, mtu))
	peer, err = toHandle.LinkByName(toName)
	must(t, err)
	must(t, toHandle.LinkSetUp(peer))
	l, err := from.LinkByName(name)
	must(t, err)
	must(t, from.LinkSetUp(l))
	return peer
}

func newTestCluster(t *testing.T, mode RoutingMode, policyIngress bool) *testCluster {
	t.Helper()
	requireRoot(t)
	c := &testCluster{t: t, mode: mode}
	bpffs := mountBPFFS(t)
	underlay := newTestNS(t, "u")
	u := nlAt(t, underlay)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	must(t, u.LinkAdd(br))
	must(t, u.LinkSetUp(br))

	podMTU := 1500
	if mode == Tunnel {
		podMTU = 1500 - vxlanOverhead
	}
	for i := 1; i <= 2; i++ {
		n := &testNode{
			name: fmt.Sprintf("node%d", i),
			ip:   netip.AddrFrom4([4]byte{192, 168, 50, byte(i)}),
			cidr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 10, byte(i), 0}), 24),
		}
		n.ns = newTestNS(t, n.name)
		h := nlAt(t, n.ns)
		eth0 := vethInto(t, u, n.name, n.ns, h, "eth0", 1500)
		port, err := u.LinkByName(n.name)
		must(t, err)
		must(t, u.LinkSetMaster(port, br))
		must(t, h.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: n.ip.AsSlice(), Mask: net.CIDRMask(24, 32)}}))

		dp, err := NewNode(Config{
			BPFFSDir: filepath.Join(bpffs, n.name), NetNS: n.ns, NodeIPv4: n.ip, Uplink: "eth0", Mode: mode,
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		must(t, err)
		must(t, os.MkdirAll(filepath.Join(bpffs, n.name), 0o700))
		must(t, dp.Start())
		t.Cleanup(func() {
			if err := dp.Teardown(); err != nil {
				t.Errorf("teardown %s: %v", n.name, err)
			}
		})
		n.dp = dp
		for j := 1; j <= 2; j++ {
			n.pods = append(n.pods, c.addPod(n, h, i*10+j, podMTU, policyIngress))
		}
		c.nodes = append(c.nodes, n)
	}
	c.programIPCache()
	for _, n := range c.nodes {
		for _, o := range c.nodes {
			if o != n {
				must(t, n.dp.UpsertRemoteNode(RemoteNode{IPv4: o.ip, PodCIDR: o.cidr}))
			}
		}
	}
	return c
}

func (c *testCluster) addPod(n *testNode, h *netlink.Handle, id, mtu int, policyIngress bool) *testPod {
	t := c.t
	p := &testPod{
		name: fmt.Sprintf("pod%d", id), id: uint16(id), identity: uint32(1000 + id), node: n,
		ip:   netip.AddrFrom4([4]byte{10, 10, byte(id / 10), byte(id)}),
		host: fmt.Sprintf("lxc%d", id),
	}
	p.ns = newTestNS(t, p.name)
	ph := nlAt(t, p.ns)
	eth0 := vethInto(t, h, p.host, p.ns, ph, "eth0", mtu)
	p.mac = eth0.Attrs().HardwareAddr
	host, err := h.LinkByName(p.host)
	must(t, err)
	must(t, ph.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: p.ip.AsSlice(), Mask: net.CIDRMask(32, 32)}}))
	gw := net.ParseIP(gatewayIP)
	// The gateway is a name only: the neighbour is static and the host
	// side answers no ARP for it.
	must(t, ph.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}))
	must(t, ph.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw}))
	must(t, ph.NeighAdd(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, IP: gw, HardwareAddr: host.Attrs().HardwareAddr,
		State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V4}))
	must(t, n.dp.UpsertEndpoint(Endpoint{ID: p.id, Identity: p.identity, IPv4: p.ip, MAC: p.mac,
		HostDevice: p.host, PolicyIngress: policyIngress}))
	return p
}

// programIPCache gives every node the cluster's address-to-identity map,
// as the agent would from CiliumEndpoints and CiliumNodes.
func (c *testCluster) programIPCache() {
	for _, n := range c.nodes {
		desired := map[netip.Prefix]IPCacheEntry{}
		for _, o := range c.nodes {
			nodeID := IdentityRemoteNode
			if o == n {
				nodeID = IdentityHost
			}
			desired[netip.PrefixFrom(o.ip, 32)] = IPCacheEntry{Identity: nodeID}
			for _, p := range o.pods {
				e := IPCacheEntry{Identity: p.identity}
				if o != n {
					e.TunnelEndpoint = o.ip
				}
				desired[netip.PrefixFrom(p.ip, 32)] = e
			}
		}
		must(c.t, n.dp.Maps().SyncIPCache(desired))
	}
}

func netipPrefix32(p *testPod) netip.Prefix { return netip.PrefixFrom(p.ip, 32) }
