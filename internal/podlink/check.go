package podlink

import (
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Check verifies that the pair Create made is still as it
// made it: the host side of the right kind with its ifindex, the pod side up with the /32
// and the default route through GatewayIPv4. It backs the CNI CHECK.
func Check(l Link, hostIfindex int) error {
	node, err := netnamespace.Netlink(l.NodeNetNS)
	if err != nil {
		return err
	}
	defer node.Close()
	host, err := node.LinkByName(l.HostIfName)
	if err != nil {
		return fmt.Errorf("host side %s: %w", l.HostIfName, err)
	}
	device, err := ParseDevice(string(l.Device))
	if err != nil {
		return err
	}
	if host.Type() != string(device) {
		return fmt.Errorf("host side %s: a %s, want a %s", l.HostIfName, host.Type(), device)
	}
	if host.Attrs().Index != hostIfindex {
		return fmt.Errorf("host side %s: ifindex %d, endpoint has %d", l.HostIfName, host.Attrs().Index, hostIfindex)
	}
	pod, err := netnamespace.Netlink(l.PodNetNS)
	if err != nil {
		return err
	}
	defer pod.Close()
	peer, err := pod.LinkByName(l.PodIfName)
	if err != nil {
		return fmt.Errorf("pod side %s: %w", l.PodIfName, err)
	}
	if peer.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("pod side %s: down", l.PodIfName)
	}
	addrs, err := pod.AddrList(peer, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("pod side %s addresses: %w", l.PodIfName, err)
	}
	want := hostPrefix(l.IPv4).String()
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == want }) {
		return fmt.Errorf("pod side %s: address %s missing", l.PodIfName, want)
	}
	routes, err := pod.RouteList(peer, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("pod side %s routes: %w", l.PodIfName, err)
	}
	gw := GatewayIPv4.AsSlice()
	if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
		return (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && net.IP(gw).Equal(r.Gw)
	}) {
		return fmt.Errorf("pod side %s: default route via %s missing", l.PodIfName, GatewayIPv4)
	}
	return nil
}
