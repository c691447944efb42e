// Package machine turns a lab plan into namespaces and links: the underlay bridge, the
// control-plane namespace and one network + mount + UTS namespace per node. Everything
// it creates is written to the lab's record first, so that teardown finds it.
package machine

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"

	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
	"github.com/cilium-go/cilium/lab/internal/record"
)

// NodeMounts are the directories of a node, under its plan Dir, and where they appear
// inside the node's mount namespace.
var NodeMounts = []struct{ Sub, Target string }{
	{"run-cilium", "/var/run/cilium"},
	{"etc-cni-net.d", "/etc/cni/net.d"},
	{"opt-cni-bin", "/opt/cni/bin"},
	{"var-lib-cilium", "/var/lib/cilium"},
	{"var-lib-kubelet", "/var/lib/kubelet"},
	{"var-log-pods", "/var/log/pods"},
	{"var-lib-cni", "/var/lib/cni"},
	// The pods' network namespaces (the node agent pins them as containerd
	// does), the node's own: the host's /run/netns stays the host's.
	{"run-netns", "/var/run/netns"},
}

// Builder creates the machines of one lab.
type Builder struct {
	Plan   plan.Plan
	Record *record.Record
	// Self is the cilium-lab executable, re-run as `node-init` to make a node's mount namespace.
	Self string
}

// Create makes the underlay, the outside client, the control plane and every node.
func (b Builder) Create() error {
	p := b.Plan
	if err := b.newNetns(p.UnderlayNetns); err != nil {
		return err
	}
	if err := inNS(p.UnderlayNetns, func(h *netlink.Handle) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: p.UnderlayBridge}}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge %s: %w", br.Name, err)
		}
		return h.LinkSetUp(br)
	}); err != nil {
		return fmt.Errorf("underlay: %w", err)
	}

	if err := b.createOutside(); err != nil {
		return fmt.Errorf("outside client: %w", err)
	}

	if err := b.newNetns(p.ControlPlaneNS); err != nil {
		return err
	}
	if err := b.uplink(p.ControlPlaneNS, "eth0", "control-plane", p.ControlPlaneIP); err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	if err := b.defaultRoute(p.ControlPlaneNS, "eth0"); err != nil {
		return fmt.Errorf("control plane: %w", err)
	}

	nsDir := filepath.Join(p.StateDir, "ns")
	if err := b.privateDir(nsDir); err != nil {
		return err
	}
	for _, n := range p.Nodes {
		if err := b.createNode(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

func (b Builder) createNode(n plan.Node) error {
	if err := b.newNetns(n.Netns); err != nil {
		return err
	}
	if err := b.uplink(n.Netns, n.Uplink, n.Name, n.IP); err != nil {
		return err
	}
	if err := b.defaultRoute(n.Netns, n.Uplink); err != nil {
		return err
	}
	if err := netns.Do(n.Netns, func() error {
		// A node routes for its pods; kube-proxy and bridged pods need netfilter on bridges.
		for _, s := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"} {
			if err := os.WriteFile("/proc/sys/"+s, []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sysctl %s: %w", s, err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, m := range NodeMounts {
		if err := os.MkdirAll(filepath.Join(n.Dir, m.Sub), 0o755); err != nil {
			return err
		}
		if err := b.mountPoint(m.Target); err != nil {
			return err
		}
	}
	return b.nodeNamespaces(n)
}

// createOutside makes the outside client: an address on the underlay, the world's
// addresses, no route beyond them, and forwarding off, so it answers for itself only
// and forwards nothing.
func (b Builder) createOutside() error {
	o := b.Plan.Outside
	if err := b.newNetns(o.Netns); err != nil {
		return err
	}
	if err := b.uplink(o.Netns, o.Uplink, "outside", o.IP); err != nil {
		return err
	}
	if err := b.world(); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	return netns.Do(o.Netns, func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0); err != nil {
			return fmt.Errorf("sysctl ip_forward: %w", err)
		}
		return nil
	})
}

// world puts the world's addresses on the outside client's uplink, each alone (/32),
// after the uplink's own address, which stays the namespace's first. The machines
// send what is for the world to the outside, their default gateway, which takes it
// as its own: no route anywhere else is needed, and a reply goes back over the
// underlay to the node that masqueraded it. The rest of the world's prefix has no
// route in the outside, which forwards nothing: it is dropped there.
func (b Builder) world() error {
	w, o := b.Plan.World, b.Plan.Outside
	if !w.Valid() {
		return nil
	}
	return inNS(o.Netns, func(h *netlink.Handle) error {
		l, err := h.LinkByName(o.Uplink)
		if err != nil {
			return err
		}
		for _, host := range w.Hosts() {
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: host.IP.AsSlice(), Mask: net.CIDRMask(32, 32)}}
			if err := h.AddrAdd(l, addr); err != nil {
				return fmt.Errorf("address %s: %w", host.IP, err)
			}
		}
		return nil
	})
}

// defaultRoute gives the machine in nsPath the default route a real machine has, via
// the outside client: a destination nothing else covers (a Service address with no
// load balancer, the world) is sent there and dropped, instead of failing at once
// with "network is unreachable".
func (b Builder) defaultRoute(nsPath, ifname string) error {
	return inNS(nsPath, func(h *netlink.Handle) error {
		l, err := h.LinkByName(ifname)
		if err != nil {
			return err
		}
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: b.Plan.Outside.IP.AsSlice()}
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("default route via %s: %w", b.Plan.Outside.IP, err)
		}
		return nil
	})
}

// newNetns records and creates a network namespace file.
func (b Builder) newNetns(path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("network namespace %s already exists: is another lab running? (cilium-lab down removes it)", path)
	}
	if err := b.Record.Add(record.Entry{Kind: record.NSFile, Path: path}); err != nil {
		return err
	}
	return netns.Create(path)
}

// uplink wires the namespace at nsPath to the underlay bridge with a veth pair: ifname
// inside the namespace, peer on the bridge.
func (b Builder) uplink(nsPath, ifname, peer string, ip netip.Addr) error {
	under, err := vns.GetFromPath(b.Plan.UnderlayNetns)
	if err != nil {
		return err
	}
	defer under.Close()
	if len(peer) > 15 {
		return fmt.Errorf("interface name %q is longer than 15 characters", peer)
	}
	err = inNS(nsPath, func(h *netlink.Handle) error {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: ifname},
			PeerName:      peer,
			PeerNamespace: netlink.NsFd(int(under)),
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", ifname, err)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(b.Plan.Underlay.Bits(), 32)}}
		if err := h.AddrAdd(veth, addr); err != nil {
			return fmt.Errorf("address %s: %w", ip, err)
		}
		return h.LinkSetUp(veth)
	})
	if err != nil {
		return err
	}
	return inNS(b.Plan.UnderlayNetns, func(h *netlink.Handle) error {
		l, err := h.LinkByName(peer)
		if err != nil {
			return err
		}
		br, err := h.LinkByName(b.Plan.UnderlayBridge)
		if err != nil {
			return err
		}
		if err := h.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("attach %s to %s: %w", peer, br.Attrs().Name, err)
		}
		return h.LinkSetUp(l)
	})
}

// inNS runs fn with a netlink handle bound to the namespace at path.
func inNS(path string, fn func(*netlink.Handle) error) error {
	ns, err := vns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

// mountPoint makes sure dir exists on the host so a node can mount over it, recording
// each directory it had to create so that teardown removes it again (if still empty).
func (b Builder) mountPoint(dir string) error {
	var missing []string
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := b.Record.Add(record.Entry{Kind: record.EmptyDir, Path: missing[i]}); err != nil {
			return err
		}
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}
