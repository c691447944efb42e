package datapath_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/internal/testenv"
)

const tcpProto = 6

func newCluster(t *testing.T, o dptest.Options) *dptest.Cluster {
	t.Helper()
	testenv.Privileged(t) // creates namespaces, veths and BPF programs
	c, err := dptest.New(o)
	if errors.Is(err, podlink.ErrNetkitUnsupported) {
		t.Skipf("netkit pod devices: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("remove cluster: %v", err)
		}
	})
	return c
}

// serve takes a server's (closer, error) and closes it when the test ends.
func serve(t *testing.T) func(io.Closer, error) {
	return func(c io.Closer, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
}

// modes are the routing modes, each with both kinds of pod device.
var modes = []struct {
	name   string
	mode   spec.RoutingMode
	device podlink.Device
}{
	{"native", spec.Native, podlink.DeviceVeth},
	{"tunnel", spec.Tunnel, podlink.DeviceVeth},
	{"native-netkit", spec.Native, podlink.DeviceNetkit},
	{"tunnel-netkit", spec.Tunnel, podlink.DeviceNetkit},
}

func TestPrivilegedConnectivity(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts dptest.Options
	}{
		{"native", dptest.Options{Mode: spec.Native}},
		{"tunnel", dptest.Options{Mode: spec.Tunnel}},
		{"native-legacy-tc", dptest.Options{Mode: spec.Native, LegacyTC: true}},
		{"native-legacy-routing", dptest.Options{Mode: spec.Native, LegacyRouting: true}},
		{"native-netkit", dptest.Options{Mode: spec.Native, PodDevice: podlink.DeviceNetkit}},
		{"tunnel-netkit", dptest.Options{Mode: spec.Tunnel, PodDevice: podlink.DeviceNetkit}},
		{"native-netkit-legacy-routing", dptest.Options{Mode: spec.Native, LegacyRouting: true,
			PodDevice: podlink.DeviceNetkit}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, mode.opts)
			n1, n2 := c.Nodes[0], c.Nodes[1]
			for _, p := range c.Pods() {
				serve(t)(dptest.ServeTCPEcho(p.NS, p.IP, 8080))
				serve(t)(dptest.ServeUDPEcho(p.NS, p.IP, 5353))
			}
			for _, pair := range []struct {
				name     string
				from, to *dptest.Pod
			}{
				{"same node", n1.Pods[0], n1.Pods[1]},
				{"cross node", n1.Pods[0], n2.Pods[0]},
				{"cross node back", n2.Pods[1], n1.Pods[1]},
			} {
				if err := dptest.Ping(pair.from.NS, pair.to.IP); err != nil {
					t.Errorf("%s: ping %s -> %s: %v", pair.name, pair.from.Name, pair.to.Name, err)
				}
				if err := dptest.TCPEcho(pair.from.NS, pair.to.IP, 8080); err != nil {
					t.Errorf("%s: tcp %s -> %s: %v", pair.name, pair.from.Name, pair.to.Name, err)
				}
				if err := dptest.UDPEcho(pair.from.NS, pair.to.IP, 5353); err != nil {
					t.Errorf("%s: udp %s -> %s: %v", pair.name, pair.from.Name, pair.to.Name, err)
				}
			}
			if err := dptest.Ping(n1.Pods[0].NS, n1.IP); err != nil {
				t.Errorf("pod to its node: %v", err)
			}
			if err := dptest.Ping(n1.NS, n1.Pods[1].IP); err != nil {
				t.Errorf("node to its pod: %v", err)
			}
			if err := dptest.TCPEcho(n2.NS, n2.Pods[0].IP, 8080); err != nil {
				t.Errorf("node to its pod over tcp: %v", err)
			}
			if err := dptest.Ping(n1.Pods[0].NS, n2.IP); err != nil {
				t.Errorf("pod to the other node: %v", err)
			}
			if err := dptest.TCPEcho(n1.NS, n2.Pods[1].IP, 8080); err != nil {
				t.Errorf("node to a pod on the other node: %v", err)
			}
			// The kernel's routes alone could carry native-mode traffic;
			// the counters show that the programs did.
			for _, n := range c.Nodes {
				cs, err := n.DP.Maps().Counters()
				if err != nil {
					t.Fatal(err)
				}
				var fwd, dropped uint64
				for _, ct := range cs {
					if ct.Reason == spec.Forwarded {
						fwd += ct.Packets
					} else {
						dropped += ct.Packets
					}
				}
				if fwd < 10 || dropped != 0 {
					t.Errorf("%s: %d packets forwarded, %d dropped: %+v", n.Name, fwd, dropped, cs)
				}
			}
		})
	}
}

// waitDrop reads events until a drop of a packet to dst:port shows up.
func waitDrop(t *testing.T, r *datapath.EventReader, dst *dptest.Pod, port uint16) spec.Event {
	t.Helper()
	return waitDropFor(t, r, dst, port, func(spec.Event) bool { return true })
}

// waitDropFor waits for a drop towards dst:port that match accepts.
func waitDropFor(t *testing.T, r *datapath.EventReader, dst *dptest.Pod, port uint16, match func(spec.Event) bool) spec.Event {
	t.Helper()
	r.SetDeadline(time.Now().Add(5 * time.Second))
	for {
		ev, err := r.Read()
		if err != nil {
			t.Fatalf("no drop event for %s:%d: %v", dst.IP, port, err)
		}
		if ev.Type == spec.EventDrop && ev.Dst == dst.IP && ev.DstPort == port && match(ev) {
			return ev
		}
	}
}

func TestPrivilegedPolicy(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode.mode, PolicyIngress: true, PodDevice: mode.device})
			n1, n2 := c.Nodes[0], c.Nodes[1]
			client, other, server := n1.Pods[0], n1.Pods[1], n2.Pods[0]
			serve(t)(dptest.ServeTCPEcho(server.NS, server.IP, 8080))
			events, err := n2.DP.Maps().NewEventReader()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { events.Close() })
			maps := n2.DP.Maps()

			allow := spec.PolicyEntry{Direction: spec.Ingress, Identity: client.Identity, Protocol: tcpProto, Port: 8080}
			if err := maps.SetPolicy(server.ID, []spec.PolicyEntry{allow}); err != nil {
				t.Fatal(err)
			}
			established, err := dptest.DialTCP(client.NS, server.IP, 8080, dptest.ReplyWait)
			if err != nil {
				t.Fatalf("allowed client: %v", err)
			}
			defer established.Close()
			if err := dptest.RoundTrip(established, "before"); err != nil {
				t.Fatalf("allowed client: %v", err)
			}
			if conn, err := dptest.DialTCP(other.NS, server.IP, 8080, 500*time.Millisecond); err == nil {
				conn.Close()
				t.Fatalf("%s reached %s without a rule", other.Name, server.Name)
			}
			ev := waitDrop(t, events, server, 8080)
			if ev.Reason != spec.DropPolicy || ev.Src != other.IP || ev.SrcIdentity != other.Identity || ev.Direction != spec.Ingress {
				t.Fatalf("drop event %+v", ev)
			}
			// A neighbour on the server's node takes the same-node path,
			// which on netkit is not the veth's.
			neighbour := n2.Pods[1]
			if conn, err := dptest.DialTCP(neighbour.NS, server.IP, 8080, 500*time.Millisecond); err == nil {
				conn.Close()
				t.Fatalf("%s reached %s without a rule", neighbour.Name, server.Name)
			}
			ev = waitDrop(t, events, server, 8080)
			if ev.Reason != spec.DropPolicy || ev.Src != neighbour.IP || ev.Direction != spec.Ingress {
				t.Fatalf("same-node drop event %+v", ev)
			}

			// Now the policy admits nobody: neither the established
			// connection nor a new one from the same client gets through.
			if err := maps.SetPolicy(server.ID, nil); err != nil {
				t.Fatal(err)
			}
			if err := dptest.RoundTrip(established, "after"); err == nil {
				t.Fatal("established connection still open after its allow went away")
			}
			if ev := waitDrop(t, events, server, 8080); ev.Src != client.IP || ev.Reason != spec.DropUnknownCT {
				t.Fatalf("drop event %+v, want the established connection's segment dropped", ev)
			}
			if conn, err := dptest.DialTCP(client.NS, server.IP, 8080, 500*time.Millisecond); err == nil {
				conn.Close()
				t.Fatal("new connection allowed after the rule went away")
			}
			// The established connection's retransmissions drop too.
			isNew := func(ev spec.Event) bool { return ev.Reason != spec.DropUnknownCT }
			if ev := waitDropFor(t, events, server, 8080, isNew); ev.Src != client.IP || ev.Reason != spec.DropPolicy {
				t.Fatalf("drop event %+v", ev)
			}
		})
	}
}

// In tunnel mode the receiving node takes the sender's identity from the
// VNI: here its ipcache is wrong on purpose and policy still admits the
// client by its real identity.
func TestPrivilegedTunnelIdentityFromVNI(t *testing.T) {
	c := newCluster(t, dptest.Options{Mode: spec.Tunnel, PolicyIngress: true})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	client, server := n1.Pods[0], n2.Pods[0]
	serve(t)(dptest.ServeTCPEcho(server.NS, server.IP, 8080))
	maps := n2.DP.Maps()
	if err := maps.UpsertIPCache(netip.PrefixFrom(client.IP, 32), spec.IPCacheEntry{Identity: 4242, TunnelEndpoint: n1.IP}); err != nil {
		t.Fatal(err)
	}
	if err := maps.SetPolicy(server.ID, []spec.PolicyEntry{{Direction: spec.Ingress, Identity: client.Identity}}); err != nil {
		t.Fatal(err)
	}
	if err := dptest.TCPEcho(client.NS, server.IP, 8080); err != nil {
		t.Fatalf("client with the right VNI identity: %v", err)
	}
}

// A restarted agent finds its pinned maps and links: traffic keeps
// flowing while no Go process holds the datapath, and Start again reuses
// the pins.
func TestPrivilegedRestartKeepsTraffic(t *testing.T) {
	for _, device := range []podlink.Device{podlink.DeviceVeth, podlink.DeviceNetkit} {
		t.Run(string(device), func(t *testing.T) { testRestartKeepsTraffic(t, device) })
	}
}

func testRestartKeepsTraffic(t *testing.T, device podlink.Device) {
	c := newCluster(t, dptest.Options{Mode: spec.Tunnel, PodDevice: device})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	serve(t)(dptest.ServeTCPEcho(n2.Pods[0].NS, n2.Pods[0].IP, 8080))
	for _, n := range c.Nodes {
		if err := n.DP.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := dptest.TCPEcho(n1.Pods[0].NS, n2.Pods[0].IP, 8080); err != nil {
		t.Fatalf("with every datapath handle closed: %v", err)
	}
	for _, n := range c.Nodes {
		if err := n.DP.Start(); err != nil {
			t.Fatalf("restart %s: %v", n.Name, err)
		}
		if err := n.DP.UpsertEndpoint(spec.Endpoint{ID: n.Pods[0].ID, Identity: n.Pods[0].Identity,
			IPv4: n.Pods[0].IP, MAC: n.Pods[0].MAC, HostDevice: n.Pods[0].HostDevice}); err != nil {
			t.Fatalf("re-program endpoint on %s: %v", n.Name, err)
		}
	}
	if err := dptest.TCPEcho(n1.Pods[0].NS, n2.Pods[0].IP, 8080); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// Pods reach a host outside the cluster, which sees the node's address.
func TestPrivilegedMasquerade(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode.mode, Masquerade: true, World: true, PodDevice: mode.device})
			serve(t)(dptest.ServeRemoteAddr(c.WorldNS, dptest.WorldIP, 8080))
			for _, p := range []*dptest.Pod{c.Nodes[0].Pods[0], c.Nodes[1].Pods[1]} {
				seen, err := dptest.RemoteAddrSeen(p.NS, dptest.WorldIP, 8080)
				if err != nil {
					t.Fatalf("%s to the world: %v", p.Name, err)
				}
				if seen != p.Node.IP {
					t.Errorf("the world saw %s from %s, want the node address %s", seen, p.Name, p.Node.IP)
				}
				if err := dptest.Ping(p.NS, dptest.WorldIP); err != nil {
					t.Errorf("%s pings the world: %v", p.Name, err)
				}
				// The port-unreachable comes back through the translation.
				if err := dptest.UDPRefused(p.NS, dptest.WorldIP, 9); err != nil {
					t.Errorf("%s: %v", p.Name, err)
				}
			}
		})
	}
}

// Masquerading never takes a port the node's own sockets may take: a
// node connection and pod connections to the same remote all work, and
// the pods' translated ports lie outside the node's ephemeral range.
func TestPrivilegedMasqueradeBesideNodeSockets(t *testing.T) {
	c := newCluster(t, dptest.Options{Mode: spec.Native, Masquerade: true, World: true})
	serve(t)(dptest.ServeRemoteAddr(c.WorldNS, dptest.WorldIP, 8080))
	n := c.Nodes[0]
	ephemeral, err := datapath.EphemeralPorts(n.NS)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	seen := map[netip.AddrPort]string{}
	dial := func(ns, who string) netip.AddrPort {
		t.Helper()
		conn, err := dptest.DialTCP(ns, dptest.WorldIP, 8080, dptest.ReplyWait)
		if err != nil {
			t.Fatalf("%s to the world: %v", who, err)
		}
		conns = append(conns, conn)
		ap, err := dptest.ReadRemoteAddr(conn)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if other, ok := seen[ap]; ok {
			t.Fatalf("%s and %s both reached the world as %s", who, other, ap)
		}
		seen[ap] = who
		return ap
	}
	for i := range 20 {
		node := dial(n.NS, fmt.Sprintf("node socket %d", i))
		if node.Addr() != n.IP || !ephemeral.Contains(node.Port()) {
			t.Fatalf("node socket seen as %s, want %s with a port in %v", node, n.IP, ephemeral)
		}
		for _, p := range n.Pods {
			pod := dial(p.NS, fmt.Sprintf("%s flow %d", p.Name, i))
			if pod.Addr() != n.IP || ephemeral.Contains(pod.Port()) {
				t.Fatalf("%s seen as %s, want %s with a port outside the node's %v", p.Name, pod, n.IP, ephemeral)
			}
		}
	}
	// Every connection still answers on its own tuple.
	for i, conn := range conns {
		if err := dptest.RoundTrip(conn, "still mine"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
}

// After a restart the agent keeps the endpoints it still has and prunes
// the rest: their programs, map entries and routes go.
func TestPrivilegedPruneEndpoints(t *testing.T) {
	for _, device := range []podlink.Device{podlink.DeviceVeth, podlink.DeviceNetkit} {
		t.Run(string(device), func(t *testing.T) { testPruneEndpoints(t, device) })
	}
}

func testPruneEndpoints(t *testing.T, device podlink.Device) {
	c := newCluster(t, dptest.Options{Mode: spec.Native, PodDevice: device})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	kept, gone := n2.Pods[0], n2.Pods[1]
	for _, p := range []*dptest.Pod{kept, gone} {
		serve(t)(dptest.ServeTCPEcho(p.NS, p.IP, 8080))
	}
	keep := spec.Endpoint{ID: kept.ID, Identity: kept.Identity, IPv4: kept.IP, MAC: kept.MAC, HostDevice: kept.HostDevice}
	if err := n2.DP.PruneEndpoints([]spec.Endpoint{keep}); err != nil {
		t.Fatal(err)
	}
	if err := n2.DP.PruneEndpoints([]spec.Endpoint{keep}); err != nil {
		t.Fatalf("second prune: %v", err)
	}
	if err := dptest.TCPEcho(n1.Pods[0].NS, kept.IP, 8080); err != nil {
		t.Fatalf("kept endpoint: %v", err)
	}
	if conn, err := dptest.DialTCP(n1.Pods[0].NS, gone.IP, 8080, 500*time.Millisecond); err == nil {
		conn.Close()
		t.Fatal("pruned endpoint still reachable")
	}
	var k datapath.EndpointKey
	var v datapath.EndpointInfo
	n := 0
	for it := n2.DP.Maps().Endpoints.Iterate(); it.Next(&k, &v); n++ {
		if v.EpId != kept.ID {
			t.Errorf("endpoint %d still in the map", v.EpId)
		}
	}
	if n != 1 {
		t.Errorf("%d endpoints in the map, want 1", n)
	}
	for range 2 {
		if err := podlink.Delete(n2.NS, gone.HostDevice); err != nil {
			t.Fatalf("delete pod link: %v", err)
		}
	}
}
