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
