package datapath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// RouteProtocol marks the routes Node installs (to remote nodes' pod
// CIDRs and to local endpoints), so that a prune can tell them from
// everyone else's. The kernel does not interpret protocols above
// RTPROT_STATIC; 0xc1 (193) is in neither linux/rtnetlink.h nor
// iproute2's rt_protos, and sits next to the routing daemons' block
// (bgp 186 ... eigrp 192) where a daemon's own number belongs. `ip route`
// shows it as "proto 193" unless rt_protos names it.
const RouteProtocol = 0xc1

// UpsertRemoteNode routes the node's pod CIDR: via the node in native
// mode, into the VXLAN device in tunnel mode (where the node's own traffic
// gets its tunnel key from the ipcache). Pod traffic does not need these
// routes in tunnel mode; the node's own does.
func (n *Node) UpsertRemoteNode(r spec.RemoteNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	maps := n.maps.Load()
	if maps == nil {
		return fmt.Errorf("route to %s: %w", r.PodCIDR, ErrNotStarted)
	}
	route := &netlink.Route{Dst: podCIDRNet(r.PodCIDR), Protocol: RouteProtocol}
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
	return maps.InvalidateRoutes()
}

// DeleteRemoteNode removes the route to its pod CIDR; only PodCIDR is
// used, so a value from RemoteNodes (without IPv4 in tunnel mode) does.
// The route is matched without its protocol: one that an agent without
// RouteProtocol installed must go too.
func (n *Node) DeleteRemoteNode(r spec.RemoteNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	maps := n.maps.Load()
	if maps == nil {
		return fmt.Errorf("delete route to %s: %w", r.PodCIDR, ErrNotStarted)
	}
	route := &netlink.Route{Dst: podCIDRNet(r.PodCIDR), Scope: netlink.SCOPE_UNIVERSE}
	if n.cfg.Mode == spec.Tunnel {
		route.Scope = netlink.SCOPE_LINK
	}
	if err := n.nl.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route to %s: %w", r.PodCIDR, err)
	}
	return maps.InvalidateRoutes()
}

// RemoteNodes lists, from the kernel, the remote nodes whose pod CIDR
// this node routes: the main table's routes with RouteProtocol through
// the uplink (native mode) or the VXLAN device (tunnel mode), which tells
// them from the endpoints' routes. In native mode IPv4 is the route's
// gateway; a tunnel-mode route has none (the ipcache holds the tunnel
// endpoint), so there IPv4 is the zero, invalid Addr. Valid after Start.
func (n *Node) RemoteNodes() ([]spec.RemoteNode, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nl == nil {
		return nil, fmt.Errorf("remote node routes: %w", ErrNotStarted)
	}
	dev := n.cfg.Uplink
	if n.cfg.Mode == spec.Tunnel {
		dev = n.cfg.TunnelDevice
	}
	l, err := n.nl.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("remote node routes: device %s: %w", dev, err)
	}
	routes, err := n.nl.RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN, LinkIndex: l.Attrs().Index},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		return nil, fmt.Errorf("list remote node routes: %w", err)
	}
	var out []spec.RemoteNode
	for _, rt := range routes {
		if rt.Dst == nil {
			continue
		}
		addr, ok := netip.AddrFromSlice(rt.Dst.IP)
		if !ok {
			continue
		}
		bits, _ := rt.Dst.Mask.Size()
		r := spec.RemoteNode{PodCIDR: netip.PrefixFrom(addr.Unmap(), bits)}
		if gw, ok := netip.AddrFromSlice(rt.Gw); ok && n.cfg.Mode == spec.Native {
			r.IPv4 = gw.Unmap()
		}
		out = append(out, r)
	}
	return out, nil
}

func podCIDRNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Masked().Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}
