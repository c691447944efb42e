package datapath

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// HostAddresses are the node's own IPv4 addresses in the network
// namespace at netns (empty: the caller's): every global unicast address
// of its devices but those the datapath makes (cilium_host, cilium_net,
// the VXLAN device, the pods' host devices), sorted. They are what
// kube-proxy takes for the node's local addresses, where NodePorts and
// hostPorts answer.
func HostAddresses(netns string) ([]netip.Addr, error) {
	h, err := netnamespace.Netlink(netns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	var out []netip.Addr
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, "cilium_") || strings.HasPrefix(name, "lxc") {
			continue
		}
		addrs, err := h.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
		}
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().Is4() && ip.Unmap().IsGlobalUnicast() {
				out = append(out, ip.Unmap())
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}
