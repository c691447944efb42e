package datapath

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
)

// A reconciler prunes remote-node routes by what RemoteNodes lists: it
// must see the routes UpsertRemoteNode made, only those, and accept its
// own answer back in DeleteRemoteNode.
func TestPrivilegedRemoteNodeRoutes(t *testing.T) {
	testenv.Privileged(t) // creates namespaces, links, routes and BPF programs
	n1 := spec.RemoteNode{IPv4: netip.MustParseAddr("192.168.77.2"), PodCIDR: netip.MustParsePrefix("10.2.0.0/24")}
	n2 := spec.RemoteNode{IPv4: netip.MustParseAddr("192.168.77.3"), PodCIDR: netip.MustParsePrefix("10.3.0.0/24")}
	for _, mode := range []struct {
		name string
		mode spec.RoutingMode
	}{{"native", spec.Native}, {"tunnel", spec.Tunnel}} {
		t.Run(mode.name, func(t *testing.T) {
			node, ns := startRouteTestNode(t, mode.mode)

			// Someone else's route through the same device is not ours.
			nl, err := netnamespace.Netlink(ns)
			must(t, err)
			t.Cleanup(func() { nl.Close() })
			up, err := nl.LinkByName("eth0")
			must(t, err)
			must(t, nl.RouteAdd(&netlink.Route{LinkIndex: up.Attrs().Index, Gw: net.IP{192, 168, 77, 9},
				Dst: &net.IPNet{IP: net.IP{10, 9, 0, 0}, Mask: net.CIDRMask(24, 32)}, Protocol: netlink.RouteProtocol(4)}))

			want := func(nodes ...spec.RemoteNode) []spec.RemoteNode {
				out := slices.Clone(nodes)
				for i := range out {
					if mode.mode == spec.Tunnel {
						out[i].IPv4 = netip.Addr{} // a tunnel route has no gateway
					}
				}
				return out
			}
			list := func() []spec.RemoteNode {
				t.Helper()
				got, err := node.RemoteNodes()
				must(t, err)
				slices.SortFunc(got, func(a, b spec.RemoteNode) int { return a.PodCIDR.Addr().Compare(b.PodCIDR.Addr()) })
				return got
			}

			must(t, node.UpsertRemoteNode(n1))
			must(t, node.UpsertRemoteNode(n2))
			if got := list(); !slices.Equal(got, want(n1, n2)) {
				t.Fatalf("remote nodes %v, want %v", got, want(n1, n2))
			}
			listed := list()
			must(t, node.DeleteRemoteNode(listed[0]))
			if got := list(); !slices.Equal(got, want(n2)) {
				t.Fatalf("after delete: remote nodes %v, want %v", got, want(n2))
			}
		})
	}
}

// startRouteTestNode starts a Node in a throwaway namespace whose uplink
// eth0 holds 192.168.77.1/24.
func startRouteTestNode(t *testing.T, mode spec.RoutingMode) (*Node, string) {
	t.Helper()
	ns := testenv.NewNetNS(t)
	must(t, testnode.AddUplink(ns, "192.168.77.1/24"))
	node, err := NewNode(Config{BPFFSDir: testnode.TempBPFFS(t), NetNS: ns,
		NodeIPv4: netip.MustParseAddr("192.168.77.1"), Uplink: "eth0", Mode: mode},
		slog.New(slog.DiscardHandler))
	must(t, err)
	t.Cleanup(func() {
		if err := node.Teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	must(t, node.Start())
	return node, ns
}

// Deleting an endpoint removes the route to it that the node made, never
// a route of the same shape that someone else made.
func TestPrivilegedEndpointRouteDeleteLeavesOthers(t *testing.T) {
	testenv.Privileged(t) // creates a namespace, links, routes and BPF programs
	node, ns := startRouteTestNode(t, spec.Native)
	nl, err := netnamespace.Netlink(ns)
	must(t, err)
	t.Cleanup(func() { nl.Close() })
	lo, err := nl.LinkByName("lo")
	must(t, err)
	theirs := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: &net.IPNet{IP: net.IP{10, 9, 0, 7}, Mask: net.CIDRMask(32, 32)},
		Scope: netlink.SCOPE_LINK, Protocol: netlink.RouteProtocol(4)}
	must(t, nl.RouteAdd(theirs))
	if err := node.DeleteEndpoint(spec.Endpoint{ID: 9, IPv4: netip.MustParseAddr("10.9.0.7"), HostDevice: "lo"}); err != nil {
		t.Logf("delete endpoint 9: %v", err)
	}
	routes, err := nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: theirs.Dst}, netlink.RT_FILTER_DST)
	must(t, err)
	if len(routes) != 1 || routes[0].Protocol != theirs.Protocol {
		t.Fatalf("routes to 10.9.0.7 after deleting an endpoint there: %v, want the other owner's", routes)
	}
}

// The node has Cilium's host device pair, and a route lookup that names
// cilium_host as the input device answers as the node forwards, from a
// pod address and from the node's own (what cilium-cli's encryption
// checks ask); Teardown removes the pair.
func TestPrivilegedHostDevices(t *testing.T) {
	testenv.Privileged(t) // creates namespaces, links and BPF programs
	node, ns := startRouteTestNode(t, spec.Tunnel)
	nl, err := netnamespace.Netlink(ns)
	must(t, err)
	t.Cleanup(func() { nl.Close() })
	host, err := nl.LinkByName(HostDevice)
	must(t, err)
	peer, err := nl.LinkByName(HostPeerDevice)
	must(t, err)
	for _, l := range []netlink.Link{host, peer} {
		if l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("%s is down", l.Attrs().Name)
		}
	}
	must(t, node.UpsertRemoteNode(spec.RemoteNode{IPv4: netip.MustParseAddr("192.168.77.2"),
		PodCIDR: netip.MustParsePrefix("10.2.0.0/24")}))
	for _, q := range []struct {
		src, dst string
		dev      string
	}{
		{"10.1.0.5", "10.2.0.7", DefaultTunnelDevice}, // pod to a remote pod
		{"192.168.77.1", "192.168.77.2", "eth0"},      // node to node
	} {
		var routes []netlink.Route
		err := netnamespace.Do(ns, func() error {
			var err error
			routes, err = nl.RouteGetWithOptions(net.ParseIP(q.dst),
				&netlink.RouteGetOptions{SrcAddr: net.ParseIP(q.src), Iif: HostDevice})
			return err
		})
		if err != nil {
			t.Fatalf("route get %s from %s iif %s: %v", q.dst, q.src, HostDevice, err)
		}
		if len(routes) == 0 {
			t.Fatalf("route get %s from %s: no route", q.dst, q.src)
		}
		dev, err := nl.LinkByIndex(routes[0].LinkIndex)
		must(t, err)
		if dev.Attrs().Name != q.dev {
			t.Errorf("route get %s from %s iif %s: dev %s, want %s", q.dst, q.src, HostDevice, dev.Attrs().Name, q.dev)
		}
	}
	must(t, node.Teardown())
	if _, err := nl.LinkByName(HostDevice); err == nil {
		t.Errorf("%s still there after Teardown", HostDevice)
	}
}
