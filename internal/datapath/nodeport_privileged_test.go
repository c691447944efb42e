package datapath_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/identity"
)

// nodePortOn writes one frontend with flags, its reverse NAT and its
// backends into node n's maps only, as n's control plane does for its own
// addresses.
func nodePortOn(t *testing.T, n *dptest.Node, f spec.Frontend, flags spec.LBFlags, rev uint16, backends ...spec.Backend) {
	t.Helper()
	m := n.DP.Maps()
	ids := []spec.BackendID{}
	for _, b := range backends {
		if err := m.UpsertBackend(b); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	if err := m.UpsertRevNAT(spec.RevNAT{Index: rev, Address: f.Address, Port: f.Port}); err != nil {
		t.Fatal(err)
	}
	if err := m.UpsertService(spec.Service{Frontend: f, Backends: ids, RevNATIndex: rev, Flags: flags}); err != nil {
		t.Fatal(err)
	}
}

// A host outside the cluster, on the nodes' underlay with no route to pod
// or service addresses, reaches NodePorts of node 1 with real sockets:
// backends on node 1 and on node 2 answer, the client's address reaches
// the backend only with externalTrafficPolicy Local, and a NodePort
// without backends refuses at once.
func TestPrivilegedNodePortConnectivity(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts dptest.Options
	}{
		{"native", dptest.Options{Mode: spec.Native}},
		{"tunnel", dptest.Options{Mode: spec.Tunnel}},
		{"native-legacy-routing-masquerade", dptest.Options{Mode: spec.Native, LegacyRouting: true, Masquerade: true}},
		{"tunnel-netkit", dptest.Options{Mode: spec.Tunnel, PodDevice: podlink.DeviceNetkit}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			mode.opts.World = true
			c := newCluster(t, mode.opts)
			n1 := c.Nodes[0]
			local, remote := n1.Pods[0], c.Nodes[1].Pods[0]
			for _, p := range []*dptest.Pod{local, remote} {
				serve(t)(dptest.ServeTCPEcho(p.NS, p.IP, 8080))
				serve(t)(dptest.ServeUDPEcho(p.NS, p.IP, 5353))
				serve(t)(dptest.ServeRemoteAddr(p.NS, p.IP, 9090))
			}
			be := func(id spec.BackendID, p *dptest.Pod, port uint16, proto uint8) spec.Backend {
				return spec.Backend{ID: id, Address: p.IP, Port: port, Protocol: proto}
			}
			front := func(port uint16, proto uint8) spec.Frontend {
				return spec.Frontend{Address: n1.IP, Port: port, Protocol: proto}
			}
			np := spec.LBNodePort
			nodePortOn(t, n1, front(30001, spec.ProtoTCP), np, 1, be(1, local, 8080, spec.ProtoTCP))
			nodePortOn(t, n1, front(30001, spec.ProtoUDP), np, 2, be(2, local, 5353, spec.ProtoUDP))
			nodePortOn(t, n1, front(30002, spec.ProtoTCP), np, 3, be(3, remote, 8080, spec.ProtoTCP))
			nodePortOn(t, n1, front(30002, spec.ProtoUDP), np, 4, be(4, remote, 5353, spec.ProtoUDP))
			nodePortOn(t, n1, front(30003, spec.ProtoTCP), np, 5, be(5, remote, 9090, spec.ProtoTCP))
			nodePortOn(t, n1, front(30004, spec.ProtoTCP), np|spec.LBLocal, 6, be(6, local, 9090, spec.ProtoTCP))
			nodePortOn(t, n1, front(30005, spec.ProtoTCP), np, 7)
			nodePortOn(t, n1, front(30005, spec.ProtoUDP), np, 8)

			world := c.WorldNS
			for _, tc := range []struct {
				name string
				run  func() error
			}{
				{"local backend over TCP", func() error { return dptest.TCPEcho(world, n1.IP, 30001) }},
				{"local backend over UDP", func() error { return dptest.UDPEcho(world, n1.IP, 30001) }},
				{"remote backend over TCP", func() error { return dptest.TCPEcho(world, n1.IP, 30002) }},
				{"remote backend over UDP", func() error { return dptest.UDPEcho(world, n1.IP, 30002) }},
				{"a remote backend sees the node", func() error { return seenAs(world, n1.IP, 30003, n1.IP) }},
				{"externalTrafficPolicy Local: the backend sees the client", func() error {
					return seenAs(world, n1.IP, 30004, dptest.WorldIP)
				}},
				{"no backend over TCP: refused", func() error {
					start := time.Now()
					conn, err := dptest.DialTCP(world, n1.IP, 30005, 2*time.Second)
					if err == nil {
						conn.Close()
					}
					if !errors.Is(err, unix.ECONNREFUSED) || time.Since(start) > time.Second {
						return errors.Join(errors.New("want connection refused at once"), err)
					}
					return nil
				}},
				{"no backend over UDP: refused", func() error { return dptest.UDPRefused(world, n1.IP, 30005) }},
			} {
				if err := tc.run(); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
			}
		})
	}
}

// seenAs connects to a ServeRemoteAddr server through to:port and fails
// unless the server saw the connection come from want.
func seenAs(ns string, to netip.Addr, port int, want netip.Addr) error {
	seen, err := dptest.RemoteAddrSeen(ns, to, port)
	if err != nil {
		return err
	}
	if seen != want {
		return errors.New("the backend saw " + seen.String() + ", want " + want.String())
	}
	return nil
}

// Policy judges a client from outside by what reaches the backend: a
// local backend sees the world; a remote one, behind the node's
// translation, sees the world through the tunnel (the VNI, as in Cilium)
// and the node (remote-node, from its ipcache) in native routing.
func TestPrivilegedNodePortPolicy(t *testing.T) {
	for _, mode := range []struct {
		name   string
		mode   spec.RoutingMode
		remote identity.NumericIdentity // what the remote backend sees
	}{
		{"native", spec.Native, identity.RemoteNode},
		{"tunnel", spec.Tunnel, identity.World},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode.mode, PolicyIngress: true, World: true})
			n1 := c.Nodes[0]
			local, remote := n1.Pods[0], c.Nodes[1].Pods[0]
			for _, p := range []*dptest.Pod{local, remote} {
				serve(t)(dptest.ServeTCPEcho(p.NS, p.IP, 8080))
			}
			front := func(port uint16) spec.Frontend {
				return spec.Frontend{Address: n1.IP, Port: port, Protocol: spec.ProtoTCP}
			}
			nodePortOn(t, n1, front(30001), spec.LBNodePort, 1, spec.Backend{ID: 1, Address: local.IP, Port: 8080, Protocol: spec.ProtoTCP})
			nodePortOn(t, n1, front(30002), spec.LBNodePort, 2, spec.Backend{ID: 2, Address: remote.IP, Port: 8080, Protocol: spec.ProtoTCP})
			allow := func(p *dptest.Pod, id identity.NumericIdentity) {
				t.Helper()
				e := spec.PolicyEntry{Direction: spec.Ingress, Identity: id, Protocol: tcpProto, Port: 8080}
				if err := p.Node.DP.Maps().SetPolicy(p.ID, []spec.PolicyEntry{e}); err != nil {
					t.Fatal(err)
				}
			}
			refusedBy := func(port int, who string) {
				t.Helper()
				if conn, err := dptest.DialTCP(c.WorldNS, n1.IP, port, 500*time.Millisecond); err == nil {
					conn.Close()
					t.Fatalf("the world reached the %s backend without a rule for it", who)
				}
			}
			other := identity.World
			if mode.remote == identity.World {
				other = identity.RemoteNode
			}
			allow(remote, other)
			refusedBy(30001, "local")
			refusedBy(30002, "remote")
			allow(local, identity.World)
			allow(remote, mode.remote)
			for _, port := range []int{30001, 30002} {
				if err := dptest.TCPEcho(c.WorldNS, n1.IP, port); err != nil {
					t.Errorf("NodePort %d once allowed: %v", port, err)
				}
			}
		})
	}
}

// A client from outside reaches a local backend whose ingress rules send
// its connections to the proxy through a NodePort: the proxy answers
// from the backend's address, which leaves the node as the frontend's,
// as the backend's own replies do; the backend sees the client's
// address, through the proxy.
func TestPrivilegedNodePortToIngressProxy(t *testing.T) {
	const proxyPort = 15003
	for _, mode := range []struct {
		name string
		opts dptest.Options
	}{
		{"native", dptest.Options{Mode: spec.Native}},
		{"tunnel", dptest.Options{Mode: spec.Tunnel}},
		{"native-legacy-routing-masquerade", dptest.Options{Mode: spec.Native, LegacyRouting: true, Masquerade: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			mode.opts.World, mode.opts.PolicyIngress = true, true
			c := newCluster(t, mode.opts)
			n1 := c.Nodes[0]
			server := n1.Pods[0]
			serve(t)(dptest.ServeRemoteAddr(server.NS, server.IP, 9090))
			nodePortOn(t, n1, spec.Frontend{Address: n1.IP, Port: 30001, Protocol: spec.ProtoTCP}, spec.LBNodePort, 1,
				spec.Backend{ID: 1, Address: server.IP, Port: 9090, Protocol: spec.ProtoTCP})
			r := startRelay(t, n1.NS, proxyPort, func(netip.Addr) uint32 { return tproxy.IngressMark(identity.World) })
			e := spec.PolicyEntry{Direction: spec.Ingress, Identity: identity.World, Protocol: tcpProto, Port: 9090, ProxyPort: proxyPort}
			if err := n1.DP.Maps().SetPolicy(server.ID, []spec.PolicyEntry{e}); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := seenAs(c.WorldNS, n1.IP, 30001, dptest.WorldIP); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.relayed(); len(got) != 3 || got[0] != netip.AddrPortFrom(server.IP, 9090) {
				t.Fatalf("the proxy relayed %v, want 3 connections to %s:9090", got, server.IP)
			}
		})
	}
}
