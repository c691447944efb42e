package datapath

import (
	"fmt"
	"testing"
	"time"
)

func TestPrivilegedConnectivity(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode RoutingMode
	}{{"native", Native}, {"tunnel", Tunnel}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newTestCluster(t, mode.mode, false)
			n1, n2 := c.nodes[0], c.nodes[1]
			for _, n := range c.nodes {
				for _, p := range n.pods {
					serveTCP(t, p.ns, p.ip, 8080)
					serveUDP(t, p.ns, p.ip, 5353)
				}
			}
			pairs := []struct {
				name     string
				from, to *testPod
			}{
				{"same node", n1.pods[0], n1.pods[1]},
				{"cross node", n1.pods[0], n2.pods[0]},
				{"cross node back", n2.pods[1], n1.pods[1]},
			}
			for _, p := range pairs {
				if err := ping(p.from.ns, p.to.ip); err != nil {
					t.Errorf("%s: ping %s -> %s: %v", p.name, p.from.name, p.to.name, err)
				}
				if err := tcpEcho(p.from.ns, p.to.ip, 8080); err != nil {
					t.Errorf("%s: tcp %s -> %s: %v", p.name, p.from.name, p.to.name, err)
				}
				if err := udpEcho(p.from.ns, p.to.ip, 5353); err != nil {
					t.Errorf("%s: udp %s -> %s: %v", p.name, p.from.name, p.to.name, err)
				}
			}
			if err := ping(n1.pods[0].ns, n1.ip); err != nil {
				t.Errorf("pod to its node: %v", err)
			}
			if err := ping(n1.ns, n1.pods[1].ip); err != nil {
				t.Errorf("node to its pod: %v", err)
			}
			if err := tcpEcho(n2.ns, n2.pods[0].ip, 8080); err != nil {
				t.Errorf("node to its pod over tcp: %v", err)
			}
			if err := ping(n1.pods[0].ns, n2.ip); err != nil {
				t.Errorf("pod to the other node: %v", err)
			}
			// The kernel's routes alone could carry native-mode traffic;
			// the counters show that the programs did.
			for _, n := range c.nodes {
				cs, err := n.dp.Maps().Counters()
				must(t, err)
				var fwd, dropped uint64
				for _, ct := range cs {
					if ct.Reason == Forwarded {
						fwd += ct.Packets
					} else if ct.Reason != DropUnsupportedL3 {
						dropped += ct.Packets
					}
				}
				if fwd < 10 || dropped != 0 {
					t.Errorf("%s: %d packets forwarded, %d dropped: %+v", n.name, fwd, dropped, cs)
				}
			}
		})
	}
}

// waitDrop reads node events until a drop of a packet to dst:port shows
// up, or fails at the deadline.
func waitDrop(t *testing.T, r *EventReader, dst *testPod, port uint16) Event {
	t.Helper()
	r.SetDeadline(time.Now().Add(5 * time.Second))
	for {
		ev, err := r.Read()
		if err != nil {
			t.Fatalf("no drop event for %s:%d: %v", dst.ip, port, err)
		}
		if ev.Type == EventDrop && ev.Dst == dst.ip && ev.DstPort == port {
			return ev
		}
	}
}

func TestPrivilegedPolicy(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode RoutingMode
	}{{"native", Native}, {"tunnel", Tunnel}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newTestCluster(t, mode.mode, true)
			n1, n2 := c.nodes[0], c.nodes[1]
			client, other, server := n1.pods[0], n1.pods[1], n2.pods[0]
			serveTCP(t, server.ns, server.ip, 8080)
			events, err := n2.dp.Maps().NewEventReader()
			must(t, err)
			t.Cleanup(func() { events.Close() })

			allowClient := PolicyEntry{Direction: Ingress, Identity: client.identity, Protocol: tcpProto, Port: 8080}
			must(t, n2.dp.Maps().SetPolicy(server.id, []PolicyEntry{allowClient}))
			established, err := dialTCP(client.ns, server.ip, 8080, replyWait)
			if err != nil {
				t.Fatalf("allowed client: %v", err)
			}
			defer established.Close()
			if err := roundTrip(established, "before"); err != nil {
				t.Fatalf("allowed client: %v", err)
			}
			if c, err := dialTCP(other.ns, server.ip, 8080, 500*time.Millisecond); err == nil {
				c.Close()
				t.Fatalf("%s reached %s without a rule", other.name, server.name)
			}
			ev := waitDrop(t, events, server, 8080)
			if ev.Reason != DropPolicy || ev.Src != other.ip || ev.SrcIdentity != other.identity || ev.Direction != Ingress {
				t.Fatalf("drop event %+v", ev)
			}

			// Policy now admits nobody: the established connection keeps
			// working, a new one from the same client does not.
			must(t, n2.dp.Maps().SetPolicy(server.id, nil))
			for i := range 3 {
				if err := roundTrip(established, fmt.Sprintf("after %d", i)); err != nil {
					t.Fatalf("established connection after the policy change: %v", err)
				}
			}
			if c, err := dialTCP(client.ns, server.ip, 8080, 500*time.Millisecond); err == nil {
				c.Close()
				t.Fatal("new connection allowed after the rule went away")
			}
			ev = waitDrop(t, events, server, 8080)
			if ev.Src != client.ip || ev.Reason != DropPolicy {
				t.Fatalf("drop event %+v", ev)
			}
		})
	}
}

// In tunnel mode the receiving node must take the sender's identity from
// the VNI: here its ipcache is wrong on purpose and policy still holds.
func TestPrivilegedTunnelIdentityFromVNI(t *testing.T) {
	c := newTestCluster(t, Tunnel, true)
	n1, n2 := c.nodes[0], c.nodes[1]
	client, server := n1.pods[0], n2.pods[0]
	serveTCP(t, server.ns, server.ip, 8080)
	must(t, n2.dp.Maps().UpsertIPCache(netipPrefix32(client), IPCacheEntry{Identity: 4242, TunnelEndpoint: n1.ip}))
	must(t, n2.dp.Maps().SetPolicy(server.id, []PolicyEntry{{Direction: Ingress, Identity: client.identity}}))
	if err := tcpEcho(client.ns, server.ip, 8080); err != nil {
		t.Fatalf("client with the right VNI identity: %v", err)
	}
}
