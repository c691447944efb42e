package datapath_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/pkg/identity"
)

// relay is the smallest transparent proxy: it relays each redirected
// connection to its original destination from the client's address, as
// the layer-7 proxy does, and records what it relayed.
type relay struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []netip.AddrPort // original destinations
}

// startRelay relays the connections sent to port, each marked with
// mark(client's address).
func startRelay(t *testing.T, ns string, port uint16, mark func(netip.Addr) uint32) *relay {
	t.Helper()
	r := &relay{}
	var err error
	if r.ln, err = (tproxy.Sockets{NetNS: ns}).ListenTCP(context.Background(), port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ln.Close() })
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			go r.relay(ns, c, mark)
		}
	}()
	return r
}

func (r *relay) relay(ns string, c net.Conn, mark func(netip.Addr) uint32) {
	defer c.Close()
	dst := c.LocalAddr().(*net.TCPAddr).AddrPort()
	src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
	r.mu.Lock()
	r.seen = append(r.seen, dst)
	r.mu.Unlock()
	up, err := (tproxy.Sockets{NetNS: ns}).Dial(context.Background(), "tcp4", src.Unmap(), netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()), mark(src.Unmap()))
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(up, c)
	io.Copy(c, up)
}

func (r *relay) relayed() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netip.AddrPort(nil), r.seen...)
}

// An allow with a proxy port sends the pod's connection to the proxy on
// its node, with the original destination kept; the proxy's connection
// upstream leaves from the pod's address and is judged as the pod's, by
// the destination's ingress policy too, and its replies come back to the
// proxy, from a pod of the same node and from another node alike.
func TestPrivilegedProxyRedirect(t *testing.T) {
	const proxyPort = 15001
	for _, mode := range []struct {
		name string
		mode spec.RoutingMode
	}{{"native", spec.Native}, {"tunnel", spec.Tunnel}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode.mode, PolicyEgress: true, PolicyIngress: true})
			n1, n2 := c.Nodes[0], c.Nodes[1]
			client, local, remote := n1.Pods[0], n1.Pods[1], n2.Pods[0]
			for _, s := range []*dptest.Pod{local, remote} {
				serve(t)(dptest.ServeRemoteAddr(s.NS, s.IP, 8080))
				serve(t)(dptest.ServeRemoteAddr(s.NS, s.IP, 9090))
			}
			ids := map[netip.Addr]identity.NumericIdentity{}
			for _, p := range c.Pods() {
				ids[p.IP] = p.Identity
			}
			r := startRelay(t, n1.NS, proxyPort, func(a netip.Addr) uint32 { return tproxy.EgressMark(ids[a]) })

			var egress []spec.PolicyEntry
			for _, s := range []*dptest.Pod{local, remote} {
				egress = append(egress,
					spec.PolicyEntry{Direction: spec.Egress, Identity: s.Identity, Protocol: tcpProto, Port: 8080, ProxyPort: proxyPort},
					spec.PolicyEntry{Direction: spec.Egress, Identity: s.Identity, Protocol: tcpProto, Port: 9090})
				ingress := []spec.PolicyEntry{{Direction: spec.Ingress, Identity: client.Identity, Protocol: tcpProto}}
				if err := s.Node.DP.Maps().SetPolicy(s.ID, ingress); err != nil {
					t.Fatal(err)
				}
			}
			if err := n1.DP.Maps().SetPolicy(client.ID, egress); err != nil {
				t.Fatal(err)
			}

			for _, s := range []*dptest.Pod{local, remote} {
				seen, err := dptest.RemoteAddrSeen(client.NS, s.IP, 8080)
				if err != nil {
					t.Fatalf("through the proxy to %s: %v", s.Name, err)
				}
				if seen != client.IP {
					t.Fatalf("%s saw the proxy's connection from %s, want the client's address %s", s.Name, seen, client.IP)
				}
				if got := r.relayed(); len(got) == 0 || got[len(got)-1] != netip.AddrPortFrom(s.IP, 8080) {
					t.Fatalf("proxy relayed %v, want the connection to %s:8080 last", got, s.IP)
				}
				// The same peer on a port without layer-7 rules: straight.
				before := len(r.relayed())
				if _, err := dptest.RemoteAddrSeen(client.NS, s.IP, 9090); err != nil {
					t.Fatalf("to %s:9090: %v", s.Name, err)
				}
				if len(r.relayed()) != before {
					t.Fatalf("the connection to %s:9090 went through the proxy", s.Name)
				}
			}

			// The destination's ingress policy judges the proxy's
			// connection as the client's: without the client's allow, the
			// proxy's connection upstream is dropped there.
			if err := remote.Node.DP.Maps().SetPolicy(remote.ID, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := dptest.DialTCP(client.NS, remote.IP, 8080, dptest.ReplyWait); err != nil {
				t.Fatalf("the proxy accepts the connection itself: %v", err)
			}
			conn, err := dptest.DialTCP(client.NS, remote.IP, 8080, dptest.ReplyWait)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := dptest.ReadRemoteAddr(conn); err == nil {
				t.Fatal("the proxy's connection upstream passed an ingress policy that does not allow the client")
			}

			// With no proxy listening the connection drops: a redirect
			// never falls back to the destination.
			r.ln.Close()
			time.Sleep(100 * time.Millisecond)
			if conn, err := dptest.DialTCP(client.NS, local.IP, 8080, 500*time.Millisecond); err == nil {
				conn.Close()
				t.Fatal("connected with no proxy listening")
			}
		})
	}
}

// A server's ingress allow with a proxy port sends its clients'
// connections, from its node and from another, to the proxy on the
// server's node; the proxy's connection, from the client's address and
// marked as the ingress proxy's, reaches the server without its ingress
// policy asked again (the proxy judged it), and the replies come back.
// With legacy routing too, where a remote client's packets cross the
// stack to the server's to-container, which cannot redirect.
func TestPrivilegedIngressProxyRedirect(t *testing.T) {
	const proxyPort = 15002
	for _, mode := range []struct {
		name   string
		mode   spec.RoutingMode
		legacy bool
	}{{"native", spec.Native, false}, {"tunnel", spec.Tunnel, false},
		{"native-legacy-routing", spec.Native, true}, {"tunnel-legacy-routing", spec.Tunnel, true}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode.mode, PolicyIngress: true, LegacyRouting: mode.legacy})
			n1, n2 := c.Nodes[0], c.Nodes[1]
			server, local, remote := n1.Pods[1], n1.Pods[0], n2.Pods[0]
			serve(t)(dptest.ServeRemoteAddr(server.NS, server.IP, 8080))
			serve(t)(dptest.ServeRemoteAddr(server.NS, server.IP, 9090))
			ids := map[netip.Addr]identity.NumericIdentity{}
			for _, p := range c.Pods() {
				ids[p.IP] = p.Identity
			}
			r := startRelay(t, n1.NS, proxyPort, func(a netip.Addr) uint32 { return tproxy.IngressMark(ids[a]) })
			var ingress []spec.PolicyEntry
			for _, cl := range []*dptest.Pod{local, remote} {
				ingress = append(ingress,
					spec.PolicyEntry{Direction: spec.Ingress, Identity: cl.Identity, Protocol: tcpProto, Port: 8080, ProxyPort: proxyPort},
					spec.PolicyEntry{Direction: spec.Ingress, Identity: cl.Identity, Protocol: tcpProto, Port: 9090})
			}
			if err := n1.DP.Maps().SetPolicy(server.ID, ingress); err != nil {
				t.Fatal(err)
			}
			for _, cl := range []*dptest.Pod{local, remote} {
				seen, err := dptest.RemoteAddrSeen(cl.NS, server.IP, 8080)
				if err != nil {
					t.Fatalf("from %s through the proxy: %v", cl.Name, err)
				}
				if seen != cl.IP {
					t.Fatalf("the server saw the proxy's connection from %s, want %s's address %s", seen, cl.Name, cl.IP)
				}
				if got := r.relayed(); len(got) == 0 || got[len(got)-1] != netip.AddrPortFrom(server.IP, 8080) {
					t.Fatalf("proxy relayed %v, want %s's connection to %s:8080 last", got, cl.Name, server.IP)
				}
				before := len(r.relayed())
				if _, err := dptest.RemoteAddrSeen(cl.NS, server.IP, 9090); err != nil {
					t.Fatalf("from %s to port 9090: %v", cl.Name, err)
				}
				if len(r.relayed()) != before {
					t.Fatalf("%s's connection to port 9090 went through the proxy", cl.Name)
				}
			}
			// With no proxy listening the connection drops: a redirect
			// never falls back to the server.
			r.ln.Close()
			time.Sleep(100 * time.Millisecond)
			for _, cl := range []*dptest.Pod{local, remote} {
				if conn, err := dptest.DialTCP(cl.NS, server.IP, 8080, 500*time.Millisecond); err == nil {
					conn.Close()
					t.Fatalf("%s connected with no proxy listening", cl.Name)
				}
			}
		})
	}
}
