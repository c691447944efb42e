package datapath

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
)

// The node's addresses are its devices' global unicast IPv4 addresses,
// every one of them, but not those of the devices the datapath makes.
func TestPrivilegedHostAddresses(t *testing.T) {
	ns := testenv.NewNetNS(t)
	nl, err := netnamespace.Netlink(ns)
	must(t, err)
	t.Cleanup(func() { nl.Close() })
	for name, addrs := range map[string][]string{
		"eth0":        {"192.168.50.1/24", "192.168.51.7/24", "169.254.0.9/16"},
		"eth1":        {"10.9.0.1/16"},
		"cilium_host": {"10.244.0.1/32"},
		"lxc1234":     {"10.244.0.2/32"},
	} {
		// A veth pair each (this kernel may have no dummy devices); the
		// peers hold no address.
		must(t, nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name[:3] + "peer" + name[len(name)-1:]}))
		link, err := nl.LinkByName(name)
		must(t, err)
		for _, a := range addrs {
			p := netip.MustParsePrefix(a)
			must(t, nl.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}))
		}
		must(t, nl.LinkSetUp(link))
	}
	got, err := HostAddresses(ns)
	must(t, err)
	want := []netip.Addr{netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("192.168.50.1"), netip.MustParseAddr("192.168.51.7")}
	if !slices.Equal(got, want) {
		t.Fatalf("HostAddresses = %v, want %v (no loopback, link-local or datapath device)", got, want)
	}
}
