package datapath

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

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
