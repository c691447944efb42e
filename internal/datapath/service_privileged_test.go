package datapath_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/podlink"
)

// serviceFor writes one frontend, its reverse NAT and its backends into
// every node's maps, as the control plane does.
func serviceFor(t *testing.T, c *dptest.Cluster, f spec.Frontend, rev uint16, backends ...spec.Backend) {
	t.Helper()
	for _, n := range c.Nodes {
		nodePortOn(t, n, f, 0, rev, backends...)
	}
}

// Pods reach services through the programs alone, with real sockets:
// the kernel must accept every translated packet, the hairpin address
// included, and a service without backends refuses at once.
func TestPrivilegedServiceConnectivity(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts dptest.Options
	}{
		{"native", dptest.Options{Mode: spec.Native}},
		{"tunnel", dptest.Options{Mode: spec.Tunnel}},
		{"native-legacy-routing", dptest.Options{Mode: spec.Native, LegacyRouting: true}},
		{"native-netkit", dptest.Options{Mode: spec.Native, PodDevice: podlink.DeviceNetkit}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, mode.opts)
			n1, n2 := c.Nodes[0], c.Nodes[1]
			client, local, remote := n1.Pods[0], n1.Pods[1], n2.Pods[0]
			for _, p := range c.Pods() {
				serve(t)(dptest.ServeTCPEcho(p.NS, p.IP, 8080))
				serve(t)(dptest.ServeUDPEcho(p.NS, p.IP, 5353))
			}
			front := func(last byte, port uint16, proto uint8) spec.Frontend {
				return spec.Frontend{Address: netip.AddrFrom4([4]byte{172, 20, 0, last}), Port: port, Protocol: proto}
			}
			backend := func(id spec.BackendID, p *dptest.Pod, proto uint8) spec.Backend {
				port := uint16(8080)
				if proto == spec.ProtoUDP {
					port = 5353
				}
				return spec.Backend{ID: id, Address: p.IP, Port: port, Protocol: proto}
			}
			cases := []struct {
				name  string
				front spec.Frontend
				to    *dptest.Pod // nil: no backend
			}{
				{"remote backend over TCP", front(10, 80, spec.ProtoTCP), remote},
				{"remote backend over UDP", front(10, 53, spec.ProtoUDP), remote},
				{"local backend over TCP", front(11, 80, spec.ProtoTCP), local},
				{"local backend over UDP", front(11, 53, spec.ProtoUDP), local},
				{"hairpin over TCP", front(12, 80, spec.ProtoTCP), client},
				{"hairpin over UDP", front(12, 53, spec.ProtoUDP), client},
				{"no backend over TCP", front(13, 80, spec.ProtoTCP), nil},
				{"no backend over UDP", front(13, 53, spec.ProtoUDP), nil},
			}
			for i, tc := range cases {
				if tc.to == nil {
					serviceFor(t, c, tc.front, uint16(i+1))
					continue
				}
				serviceFor(t, c, tc.front, uint16(i+1), backend(spec.BackendID(i+1), tc.to, tc.front.Protocol))
			}
			for _, tc := range cases {
				var err error
				switch {
				case tc.to == nil && tc.front.Protocol == spec.ProtoTCP:
					start := time.Now()
					conn, derr := dptest.DialTCP(client.NS, tc.front.Address, int(tc.front.Port), 2*time.Second)
					if derr == nil {
						conn.Close()
					}
					if !errors.Is(derr, unix.ECONNREFUSED) || time.Since(start) > time.Second {
						err = errors.Join(errors.New("want connection refused at once"), derr)
					}
				case tc.to == nil:
					err = dptest.UDPRefused(client.NS, tc.front.Address, int(tc.front.Port))
				case tc.front.Protocol == spec.ProtoTCP:
					err = dptest.TCPEcho(client.NS, tc.front.Address, int(tc.front.Port))
				default:
					err = dptest.UDPEcho(client.NS, tc.front.Address, int(tc.front.Port))
				}
				if err != nil {
					t.Errorf("%s (%s): %v", tc.name, tc.front, err)
				}
			}
		})
	}
}

// Backends in a node's own network (hostNetwork pods, at the node's
// address) serve every kind of client, with real sockets: a pod through a
// ClusterIP and through another node's NodePort (translated where it
// starts), and a host outside the cluster through a NodePort, whether the
// backend is on the node called or on another one.
// externalTrafficPolicy Local keeps the outside client's address.
func TestPrivilegedHostNetworkBackends(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts dptest.Options
	}{
		{"native", dptest.Options{Mode: spec.Native, World: true}},
		{"tunnel", dptest.Options{Mode: spec.Tunnel, World: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, mode.opts)
			n1, n2 := c.Nodes[0], c.Nodes[1]
			client := n2.Pods[0]
			for _, n := range []*dptest.Node{n1, n2} {
				serve(t)(dptest.ServeTCPEcho(n.NS, n.IP, 8080))
				serve(t)(dptest.ServeUDPEcho(n.NS, n.IP, 5353))
			}
			serve(t)(dptest.ServeRemoteAddr(n1.NS, n1.IP, 9090))
			host := func(id spec.BackendID, n *dptest.Node, proto uint8) spec.Backend {
				port := uint16(8080)
				if proto == spec.ProtoUDP {
					port = 5353
				}
				return spec.Backend{ID: id, Address: n.IP, Port: port, Protocol: proto}
			}
			clusterIP := func(last byte, proto uint8) spec.Frontend {
				return spec.Frontend{Address: netip.AddrFrom4([4]byte{172, 20, 0, last}), Port: 80, Protocol: proto}
			}
			// n1's NodePorts at its own address, and on every node at
			// any node's address (spec.AnyNode), as the load balancer
			// writes them.
			nodePort := func(rev uint16, port uint16, proto uint8, flags spec.LBFlags, be spec.Backend) {
				nodePortOn(t, n1, spec.Frontend{Address: n1.IP, Port: port, Protocol: proto}, spec.LBNodePort|flags, rev, be)
				for i, n := range c.Nodes {
					nodePortOn(t, n, spec.Frontend{Address: spec.AnyNode, Port: port, Protocol: proto}, spec.LBNodePort|flags,
						rev+100+uint16(i), be)
				}
			}
			rev := uint16(1)
			for _, n := range []*dptest.Node{n1, n2} {
				for _, proto := range []uint8{spec.ProtoTCP, spec.ProtoUDP} {
					last := byte(10)
					port := uint16(30001)
					if n == n2 {
						last, port = 11, 30002
					}
					serviceFor(t, c, clusterIP(last, proto), rev, host(spec.BackendID(rev), n, proto))
					nodePort(rev+1, port, proto, 0, host(spec.BackendID(rev+1), n, proto))
					rev += 2
				}
			}
			nodePort(rev, 30003, spec.ProtoTCP, spec.LBLocal, spec.Backend{ID: spec.BackendID(rev), Address: n1.IP, Port: 9090, Protocol: spec.ProtoTCP})

			echo := func(ns string, to netip.Addr, port int) error {
				return errors.Join(dptest.TCPEcho(ns, to, port), dptest.UDPEcho(ns, to, port))
			}
			for _, tc := range []struct {
				name string
				run  func() error
			}{
				{"a pod through a ClusterIP to another node's network", func() error { return echo(client.NS, clusterIP(10, 0).Address, 80) }},
				{"a pod through a ClusterIP to its own node's network", func() error { return echo(client.NS, clusterIP(11, 0).Address, 80) }},
				{"a pod through another node's NodePort to that node's network", func() error { return echo(client.NS, n1.IP, 30001) }},
				{"a pod through another node's NodePort to its own node's network", func() error { return echo(client.NS, n1.IP, 30002) }},
				{"the world through a NodePort to the node's own network", func() error { return echo(c.WorldNS, n1.IP, 30001) }},
				{"the world through a NodePort to another node's network", func() error { return echo(c.WorldNS, n1.IP, 30002) }},
				{"externalTrafficPolicy Local: the node's own network sees the client", func() error {
					return seenAs(c.WorldNS, n1.IP, 30003, dptest.WorldIP)
				}},
			} {
				if err := tc.run(); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
			}
		})
	}
}
