// Package podlink makes, checks and deletes the device pair (veth or
// netkit) between a pod and its node: the CNI plugin's half of a pod's
// wiring, with netlink in network namespaces and no BPF, so that
// cilium-cni links neither cilium/ebpf nor the datapath. The datapath
// (internal/datapath) programs the pair afterwards.
package podlink

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// GatewayIPv4 is every pod's next hop. It is a name only: the pod holds a
// permanent neighbour entry that resolves it to the host-side veth, so no
// device owns it and nothing answers ARP for it.
var GatewayIPv4 = netip.MustParseAddr("169.254.1.1")

// Device is the kind of device pair that connects a pod to its node.
type Device string

const (
	// DeviceVeth is a veth pair: the pod's packets cross the host
	// side's backlog before the endpoint's programs see them.
	DeviceVeth Device = "veth"
	// DeviceNetkit is a netkit pair in L2 mode, the primary in the
	// node: the endpoint's programs run as the pod transmits, and
	// nothing passes in either direction until they are attached.
	DeviceNetkit Device = "netkit"
)

// ErrNetkitUnsupported is returned when the kernel cannot make netkit
// pairs (built without CONFIG_NETKIT, or older than 6.7).
var ErrNetkitUnsupported = errors.New("kernel without netkit devices")

// ParseDevice accepts "veth", "netkit" and "" (veth).
func ParseDevice(s string) (Device, error) {
	switch d := Device(s); d {
	case "", DeviceVeth:
		return DeviceVeth, nil
	case DeviceNetkit:
		return d, nil
	}
	return "", fmt.Errorf("unknown pod device %q (want veth or netkit)", s)
}

// Link is the device pair between a pod and its node.
type Link struct {
	NodeNetNS  string // path; empty for the caller's namespace
	PodNetNS   string // path
	PodIfName  string // in the pod, e.g. eth0
	HostIfName string // in the node, e.g. lxc1a2b3c
	IPv4       netip.Addr
	MTU        int    // 0 for 1500
	Device     Device // "" for veth
}

// Result is what the endpoint needs from the link.
type Result struct {
	PodMAC      net.HardwareAddr
	HostMAC     net.HardwareAddr
	HostIfindex int
}

// Create makes the pair (a veth or a netkit pair, l.Device), moves one end into the pod, gives it the
// address as a /32 and a default route through GatewayIPv4. This is the
// CNI plugin's half of the wiring; Node.UpsertEndpoint does the rest.
func Create(l Link) (Result, error) {
	var res Result
	if !l.IPv4.Is4() {
		return res, fmt.Errorf("pod link %s: IPv4 address required", l.HostIfName)
	}
	if l.MTU == 0 {
		l.MTU = 1500
	}
	node, err := netnamespace.Netlink(l.NodeNetNS)
	if err != nil {
		return res, err
	}
	defer node.Close()
	pod, err := netnamespace.Netlink(l.PodNetNS)
	if err != nil {
		return res, err
	}
	defer pod.Close()
	podNS, err := netns.GetFromPath(l.PodNetNS)
	if err != nil {
		return res, fmt.Errorf("open netns %s: %w", l.PodNetNS, err)
	}
	defer podNS.Close()

	device, err := ParseDevice(string(l.Device))
	if err != nil {
		return res, err
	}
	if err := node.LinkAdd(newPair(device, l, podNS)); err != nil {
		if device == DeviceNetkit && errors.Is(err, unix.EOPNOTSUPP) {
			err = fmt.Errorf("%w: %w", ErrNetkitUnsupported, err)
		}
		return res, fmt.Errorf("create %s %s: %w", device, l.HostIfName, err)
	}
	host, err := node.LinkByName(l.HostIfName)
	if err == nil {
		err = node.LinkSetUp(host)
	}
	if err != nil {
		return res, errors.Join(fmt.Errorf("host side %s: %w", l.HostIfName, err), deleteLink(node, l.HostIfName))
	}
	peer, err := configurePodSide(pod, l, host.Attrs().HardwareAddr)
	if err != nil {
		return res, errors.Join(err, deleteLink(node, l.HostIfName))
	}
	// The datapath is IPv4 only for now: without IPv6 on the pair, the
	// pod's neighbour discovery does not show up as a stream of drops.
	for _, side := range []struct{ ns, dev string }{{l.PodNetNS, l.PodIfName}, {l.NodeNetNS, l.HostIfName}} {
		if err := disableIPv6(side.ns, side.dev); err != nil {
			return res, errors.Join(err, deleteLink(node, l.HostIfName))
		}
	}
	return Result{PodMAC: peer.Attrs().HardwareAddr, HostMAC: host.Attrs().HardwareAddr,
		HostIfindex: host.Attrs().Index}, nil
}

// ProbeNetkit makes a netkit pair in the node's namespace and removes it
// again: ErrNetkitUnsupported says the kernel has no netkit (it is built
// without CONFIG_NETKIT, or is older than 6.7).
func ProbeNetkit(nodeNetNS string) error {
	const name, peer = "cilium_nkprobe", "cilium_nkprobe1"
	node, err := netnamespace.Netlink(nodeNetNS)
	if err != nil {
		return err
	}
	defer node.Close()
	// A probe that crashed half way may have left its pair.
	if err := deleteLink(node, name); err != nil {
		return err
	}
	nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.NETKIT_MODE_L2,
		Policy: netlink.NETKIT_POLICY_BLACKHOLE, PeerPolicy: netlink.NETKIT_POLICY_BLACKHOLE}
	nk.SetPeerAttrs(&netlink.LinkAttrs{Name: peer})
	if err := node.LinkAdd(nk); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			err = fmt.Errorf("%w: %w", ErrNetkitUnsupported, err)
		}
		return fmt.Errorf("probe netkit: %w", err)
	}
	return deleteLink(node, name)
}

// newPair is the pair to create in the node. The peer is created directly
// in the pod's namespace, so a name clash with the node's devices cannot
// happen.
func newPair(device Device, l Link, podNS netns.NsHandle) netlink.Link {
	attrs := netlink.LinkAttrs{Name: l.HostIfName, MTU: l.MTU}
	if device == DeviceVeth {
		return &netlink.Veth{LinkAttrs: attrs, PeerName: l.PodIfName, PeerNamespace: netlink.NsFd(podNS)}
	}
	// L2, because the programs write MACs and the pod resolves its
	// gateway as on a veth. Blackhole on both sides: until the agent
	// attaches the endpoint's programs, the pod can neither send
	// unchecked (spoofed) traffic nor receive traffic its policy
	// has not judged.
	nk := &netlink.Netkit{LinkAttrs: attrs, Mode: netlink.NETKIT_MODE_L2,
		Policy: netlink.NETKIT_POLICY_BLACKHOLE, PeerPolicy: netlink.NETKIT_POLICY_BLACKHOLE,
		Scrub: netlink.NETKIT_SCRUB_DEFAULT, PeerScrub: netlink.NETKIT_SCRUB_DEFAULT}
	nk.SetPeerAttrs(&netlink.LinkAttrs{Name: l.PodIfName, MTU: l.MTU, Namespace: netlink.NsFd(podNS)})
	return nk
}

func configurePodSide(pod *netlink.Handle, l Link, hostMAC net.HardwareAddr) (netlink.Link, error) {
	peer, err := pod.LinkByName(l.PodIfName)
	if err != nil {
		return nil, fmt.Errorf("pod side %s: %w", l.PodIfName, err)
	}
	idx := peer.Attrs().Index
	gw := GatewayIPv4.AsSlice()
	steps := []struct {
		what string
		do   func() error
	}{
		{"up", func() error { return pod.LinkSetUp(peer) }},
		{"address", func() error { return pod.AddrAdd(peer, &netlink.Addr{IPNet: hostPrefix(l.IPv4)}) }},
		{"gateway route", func() error {
			return pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: hostPrefix(GatewayIPv4), Scope: netlink.SCOPE_LINK})
		}},
		{"default route", func() error { return pod.RouteReplace(&netlink.Route{LinkIndex: idx, Gw: gw}) }},
		{"gateway neighbour", func() error {
			return pod.NeighSet(&netlink.Neigh{LinkIndex: idx, IP: gw, HardwareAddr: hostMAC,
				State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V4})
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return nil, fmt.Errorf("pod %s %s: %w", l.PodIfName, s.what, err)
		}
	}
	return pod.LinkByName(l.PodIfName)
}

// Delete removes the pair by its host side; a missing link is no
// error.
func Delete(nodeNetNS, hostIfName string) error {
	node, err := netnamespace.Netlink(nodeNetNS)
	if err != nil {
		return err
	}
	defer node.Close()
	return deleteLink(node, hostIfName)
}

func deleteLink(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if err := h.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

func disableIPv6(ns, dev string) error {
	return netnamespace.Do(ns, func() error {
		err := os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // a kernel without IPv6
			return fmt.Errorf("disable IPv6 on %s: %w", dev, err)
		}
		return nil
	})
}

// hostPrefix is a as a host route's destination.
func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}
