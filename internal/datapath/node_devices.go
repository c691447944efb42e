package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// attach hooks prog to a device of the node: a pinned TCX or netkit link,
// or a tc filter when configured or when the kernel has no TCX.
func (n *Node) attach(pin string, ifindex int, prog *ebpf.Program, at ebpf.AttachType) error {
	if isNetkit(at) {
		return netnamespace.Do(n.cfg.NetNS, func() error { return attachTCX(pin, ifindex, prog, at) })
	}
	if !n.cfg.LegacyTC {
		err := netnamespace.Do(n.cfg.NetNS, func() error { return attachTCX(pin, ifindex, prog, at) })
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
	return netnamespace.Netlink(n.cfg.NetNS)
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

// HostDevice and its peer are Cilium's pair of host devices. Cilium routes
// through them; cilium-go's programs do not need them, but Cilium's tools
// name cilium_host when they ask the node how it routes pod traffic
// (cilium-cli's encryption checks run `ip route get DST from POD iif
// cilium_host`): the pair exists, up, with no address, and with source
// validation off on cilium_host so such a lookup answers as the node
// would forward.
const (
	HostDevice     = "cilium_host"
	HostPeerDevice = "cilium_net"
)

// ensureHostDevices creates the pair (a veth) if it is missing and brings
// both ends up.
func (n *Node) ensureHostDevices(mtu int) error {
	l, err := n.nl.LinkByName(HostDevice)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if !errors.As(err, &notFound) {
			return fmt.Errorf("look up %s: %w", HostDevice, err)
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: HostDevice, MTU: mtu}, PeerName: HostPeerDevice}
		if err := n.nl.LinkAdd(veth); err != nil {
			return fmt.Errorf("create %s: %w", HostDevice, err)
		}
		if l, err = n.nl.LinkByName(HostDevice); err != nil {
			return fmt.Errorf("look up %s: %w", HostDevice, err)
		}
	}
	peer, err := n.nl.LinkByName(HostPeerDevice)
	if err != nil {
		return fmt.Errorf("look up %s: %w", HostPeerDevice, err)
	}
	for _, d := range []netlink.Link{l, peer} {
		if err := n.nl.LinkSetUp(d); err != nil {
			return fmt.Errorf("set %s up: %w", d.Attrs().Name, err)
		}
	}
	return netnamespace.Do(n.cfg.NetNS, func() error {
		for _, c := range []struct{ dev, key, val string }{
			{HostDevice, "rp_filter", "0"}, {HostPeerDevice, "rp_filter", "0"},
			{HostDevice, "accept_local", "1"},
		} {
			p := filepath.Join("/proc/sys/net/ipv4/conf", c.dev, c.key)
			if err := os.WriteFile(p, []byte(c.val), 0o644); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
}

// attachDevices hooks the node programs to the uplink and, in tunnel
// mode, to the VXLAN device.
func (n *Node) attachDevices(progs *NodePrograms, uplink, tunnel netlink.Link) error {
	if err := n.attach(n.linkPin("netdev", n.cfg.Uplink, "ingress"), uplink.Attrs().Index,
		progs.FromNetdev, ebpf.AttachTCXIngress); err != nil {
		return err
	}
	// The uplink's egress translates the node's replies as a hostNetwork
	// backend, and masquerades with legacy routing.
	if err := n.attach(n.linkPin("netdev", n.cfg.Uplink, "egress"), uplink.Attrs().Index,
		progs.ToNetdev, ebpf.AttachTCXEgress); err != nil {
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
