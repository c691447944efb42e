package relay

//lint:file-ignore SA1019 Summary (deprecated in flow.proto) tells the test's flows apart; the relay passes it on untouched.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/cilium/api/v1/peer"
	relaypb "github.com/cilium/cilium/api/v1/relay"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
)

// hubbleNode is a node's Hubble server as the agent runs it (the real
// observer over a ring), on a TCP port with mutual TLS.
type hubbleNode struct {
	name  string
	ring  *container.Ring
	agent *container.Ring // agent events
	srv   *grpc.Server
	addr  string
}

// staticPeers is a Peer service that lists fixed nodes and then waits.
type staticPeers struct {
	peer.UnimplementedPeerServer
	nodes []*hubbleNode
}

func (s *staticPeers) Notify(_ *peer.NotifyRequest, stream peer.Peer_NotifyServer) error {
	for _, n := range s.nodes {
		err := stream.Send(&peer.ChangeNotification{Name: n.name, Address: n.addr, Type: peer.ChangeNotificationType_PEER_ADDED,
			Tls: &peer.TLS{ServerName: ServerName(n.name, "")}})
		if err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

// cluster is nodes whose certificates one CA signed; the first also
// serves the Peer service.
type cluster struct {
	pki   *testenv.PKI
	nodes []*hubbleNode
	base  time.Time
}

// newCluster is node-a and node-b, each the real observer over a ring.
func newCluster(t *testing.T) *cluster { return newClusterOf(t, nil, "node-a", "node-b") }

// newClusterOf is the nodes called names; fakes serve some of them
// instead of the observer over a ring.
func newClusterOf(t *testing.T, fakes map[string]observer.ObserverServer, names ...string) *cluster {
	c := &cluster{pki: testenv.NewPKI(t, t.TempDir(), "ca"), base: time.Now().Add(-time.Minute)}
	// Cilium's certificates: one wildcard for every node's server.
	c.pki.Issue(t, "server", x509.ExtKeyUsageServerAuth, []string{"*.default.hubble-grpc.cilium.io"})
	c.pki.Issue(t, "relay", x509.ExtKeyUsageClientAuth, nil)
	cert, err := tls.LoadX509KeyPair(c.pki.Path("server.crt"), c.pki.Path("server.key"))
	must(t, err)
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: c.caPool(t), ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13}
	for _, name := range names {
		ring, err := container.NewRing(63)
		must(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		agent, err := container.NewRing(15)
		must(t, err)
		n := &hubbleNode{name: name, ring: ring, agent: agent, srv: grpc.NewServer(grpc.Creds(credentials.NewTLS(tc))), addr: ln.Addr().String()}
		var obs observer.ObserverServer = hubbleobserver.New(ring, name, "test").WithAgentEvents(agent)
		if f, ok := fakes[name]; ok {
			obs = f
		}
		observer.RegisterObserverServer(n.srv, obs)
		c.nodes = append(c.nodes, n)
		t.Cleanup(n.srv.Stop)
		defer func() { go n.srv.Serve(ln) }()
	}
	peer.RegisterPeerServer(c.nodes[0].srv, &staticPeers{nodes: c.nodes})
	return c
}

func (c *cluster) caPool(t *testing.T) *x509.CertPool {
	pem, err := os.ReadFile(c.pki.Path("ca.crt"))
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

// write puts a flow at base+ms into node i's ring.
func (c *cluster) write(i, ms int) {
	n := c.nodes[i]
	n.ring.Write(container.Event{Flow: &flow.Flow{Time: timestamppb.New(c.base.Add(time.Duration(ms) * time.Millisecond)),
		NodeName: n.name, Verdict: flow.Verdict_FORWARDED, Summary: fmt.Sprint(ms)}})
}

// relay runs a relay with client certificate cert against c and returns
// a client of it.
func (c *cluster) relay(t *testing.T, cert string) observer.ObserverClient {
	addr := c.serveRelay(t, cert)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	client := observer.NewObserverClient(conn)
	c.waitForNodes(t, client)
	return client
}

// serveRelay runs a relay with client certificate cert against c, its
// server made with opts, and returns its address.
func (c *cluster) serveRelay(t *testing.T, cert string, opts ...grpc.ServerOption) string {
	kp, err := tls.LoadX509KeyPair(c.pki.Path(cert+".crt"), c.pki.Path(cert+".key"))
	must(t, err)
	pool := NewPool(Options{PeerTarget: c.nodes[0].addr, PeerServerName: ServerName("hubble-peer", ""),
		TLS:         &tls.Config{Certificates: []tls.Certificate{kp}, RootCAs: c.caPool(t), MinVersion: tls.VersionTLS13},
		DialTimeout: 2 * time.Second, RetryTimeout: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pool.Run(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := grpc.NewServer(opts...)
	observer.RegisterObserverServer(srv, NewServer(pool, "test", 100, 200*time.Millisecond))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// waitForNodes waits until the relay learnt c's nodes from the Peer
// service.
func (c *cluster) waitForNodes(t *testing.T, client observer.ObserverClient) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		nodes, err := client.GetNodes(context.Background(), &observer.GetNodesRequest{})
		if err != nil || len(nodes.GetNodes()) != len(c.nodes) {
			return fmt.Errorf("nodes %v (%v)", nodes.GetNodes(), err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
}

// answer is a GetFlows answer as lines: "status STATE nodes" or
// "node ms".
func answer(t *testing.T, stream grpc.ServerStreamingClient[observer.GetFlowsResponse], n int) []string {
	t.Helper()
	var out []string
	for n < 0 || len(out) < n {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		if s := r.GetNodeStatus(); s != nil {
			out = append(out, "status "+s.GetStateChange().String()+" "+strings.Join(s.GetNodeNames(), ","))
			continue
		}
		out = append(out, r.GetNodeName()+" "+r.GetFlow().GetSummary())
	}
	return out
}

func flows(t *testing.T, c observer.ObserverClient, req *observer.GetFlowsRequest) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.GetFlows(ctx, req)
	must(t, err)
	return answer(t, stream, -1)
}

func TestRelayMergesNodesInTimeOrder(t *testing.T) {
	c := newCluster(t)
	for ms := 1; ms <= 6; ms++ {
		c.write((ms+1)%2, ms) // odd on node-a, even on node-b
	}
	client := c.relay(t, "relay")

	got := flows(t, client, &observer.GetFlowsRequest{Number: 4})
	want := []string{"status NODE_CONNECTED node-a,node-b", "node-a 3", "node-b 4", "node-a 5", "node-b 6"}
	if !slices.Equal(got, want) {
		t.Errorf("last 4: %q, want %q", got, want)
	}
	got = flows(t, client, &observer.GetFlowsRequest{Number: 3, First: true})
	want = []string{"status NODE_CONNECTED node-a,node-b", "node-a 1", "node-b 2", "node-a 3"}
	if !slices.Equal(got, want) {
		t.Errorf("first 3: %q, want %q", got, want)
	}
	// A filter applies on every node.
	got = flows(t, client, &observer.GetFlowsRequest{Whitelist: []*flow.FlowFilter{{NodeName: []string{"node-b"}}}})
	want = []string{"status NODE_CONNECTED node-a,node-b", "node-b 2", "node-b 4", "node-b 6"}
	if !slices.Equal(got, want) {
		t.Errorf("node-b's: %q, want %q", got, want)
	}

	// Followed flows that reach the relay out of order leave it in order.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Since, so that flows written before a node got the request count.
	stream, err := client.GetFlows(ctx, &observer.GetFlowsRequest{Follow: true,
		Since: timestamppb.New(c.base.Add(6500 * time.Microsecond))})
	must(t, err)
	if got := answer(t, stream, 1); got[0] != "status NODE_CONNECTED node-a,node-b" {
		t.Fatalf("follow starts with %q", got)
	}
	c.write(1, 8)
	time.Sleep(50 * time.Millisecond)
	c.write(0, 7)
	if got, want := answer(t, stream, 2), []string{"node-a 7", "node-b 8"}; !slices.Equal(got, want) {
		t.Errorf("followed: %q, want %q", got, want)
	}

	st, err := client.ServerStatus(ctx, &observer.ServerStatusRequest{})
	must(t, err)
	if st.GetNumFlows() != 8 || st.GetMaxFlows() != 126 || st.GetNumConnectedNodes().GetValue() != 2 ||
		st.GetNumUnavailableNodes().GetValue() != 0 {
		t.Errorf("status %v", st)
	}
}

// TestRelayServesWhenANodeGoes: a node that stops answering is reported,
// and the others' flows still come.
func TestRelayServesWhenANodeGoes(t *testing.T) {
	c := newCluster(t)
	c.write(0, 1)
	c.write(1, 2)
	client := c.relay(t, "relay")
	c.nodes[1].srv.Stop()

	// The first request after may still find node-b's stream breaking:
	// then it says so where it broke. Once the connection is known to
	// have failed, node-b is not asked.
	testenv.Eventually(t, 10*time.Second, func() error {
		got := flows(t, client, &observer.GetFlowsRequest{Number: 5})
		want := []string{"status NODE_CONNECTED node-a", "status NODE_UNAVAILABLE node-b", "node-a 1"}
		if !slices.Equal(got, want) && !slices.Equal(got, []string{"status NODE_CONNECTED node-a,node-b", "node-a 1", "status NODE_UNAVAILABLE node-b"}) {
			t.Fatalf("flows: %q, want %q", got, want)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("flows %q", got)
		}
		return nil
	})
	ctx := context.Background()
	st, err := client.ServerStatus(ctx, &observer.ServerStatusRequest{})
	must(t, err)
	if st.GetNumConnectedNodes().GetValue() != 1 || st.GetNumUnavailableNodes().GetValue() != 1 ||
		!slices.Equal(st.GetUnavailableNodes(), []string{"node-b"}) || st.GetNumFlows() != 1 {
		t.Errorf("status %v", st)
	}
	nodes, err := client.GetNodes(ctx, &observer.GetNodesRequest{})
	must(t, err)
	var states []string
	for _, n := range nodes.GetNodes() {
		states = append(states, n.GetName()+" "+n.GetState().String())
		if !n.GetTls().GetEnabled() || n.GetTls().GetServerName() != n.GetName()+".default.hubble-grpc.cilium.io" {
			t.Errorf("node %s's TLS: %v", n.GetName(), n.GetTls())
		}
	}
	if want := []string{"node-a " + relaypb.NodeState_NODE_CONNECTED.String(), "node-b " + relaypb.NodeState_NODE_UNAVAILABLE.String()}; !slices.Equal(states, want) {
		t.Errorf("nodes %q, want %q", states, want)
	}
}

// TestRelayWithoutTheCAsCertificateSeesNothing: the nodes refuse a relay
// whose client certificate another CA signed, and the relay refuses a
// server whose certificate does not name the node it dials.
func TestRelayWithoutTheCAsCertificateSeesNothing(t *testing.T) {
	c := newCluster(t)
	c.write(0, 1)
	testenv.NewPKI(t, c.pki.Dir, "other-ca").Issue(t, "intruder", x509.ExtKeyUsageClientAuth, nil)
	pool := NewPool(Options{PeerTarget: c.nodes[0].addr, PeerServerName: ServerName("hubble-peer", ""), DialTimeout: time.Second}, slog.New(slog.DiscardHandler))
	kp, err := tls.LoadX509KeyPair(c.pki.Path("intruder.crt"), c.pki.Path("intruder.key"))
	must(t, err)
	pool.opts.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, RootCAs: c.caPool(t), MinVersion: tls.VersionTLS13}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := pool.follow(ctx); err == nil || len(pool.list()) != 0 {
		t.Fatalf("the peer service answered a client of another CA: %v, nodes %v", err, pool.list())
	}

	// The nodes' servers present a certificate for *.default.hubble-grpc.cilium.io;
	// a peer that claims another name is not trusted.
	pool = NewPool(Options{DialTimeout: time.Second, TLS: &tls.Config{RootCAs: c.caPool(t), MinVersion: tls.VersionTLS13}},
		slog.New(slog.DiscardHandler))
	kp, err = tls.LoadX509KeyPair(c.pki.Path("relay.crt"), c.pki.Path("relay.key"))
	must(t, err)
	pool.opts.TLS.Certificates = []tls.Certificate{kp}
	pool.apply(&peer.ChangeNotification{Name: "node-a", Address: c.nodes[0].addr, Tls: &peer.TLS{ServerName: "node-a.evil.example"}})
	pool.apply(&peer.ChangeNotification{Name: "node-b", Address: c.nodes[1].addr, Tls: &peer.TLS{ServerName: ServerName("node-b", "")}})
	defer pool.closeAll()
	connected, unavailable := pool.split(context.Background())
	if !slices.Equal(names(connected), []string{"node-b"}) || !slices.Equal(names(unavailable), []string{"node-a"}) {
		t.Errorf("connected %v, unavailable %v: want only the node whose certificate matches", names(connected), names(unavailable))
	}
}

func TestServerName(t *testing.T) {
	for _, tc := range [][3]string{
		{"node1", "", "node1.default.hubble-grpc.cilium.io"},
		{"ip-10-0-0-1.ec2.internal", "prod.eu", "ip-10-0-0-1-ec2-internal.prod-eu.hubble-grpc.cilium.io"},
	} {
		if got := ServerName(tc[0], tc[1]); got != tc[2] {
			t.Errorf("ServerName(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRelayMergesMaskedFlows: the nodes apply the field mask; the relay
// still merges by the responses' times and names the nodes, though the
// flows carry neither; a bad path is refused naming it.
func TestRelayMergesMaskedFlows(t *testing.T) {
	c := newCluster(t)
	for ms := 1; ms <= 4; ms++ {
		c.write((ms+1)%2, ms)
	}
	client := c.relay(t, "relay")
	mask := &fieldmaskpb.FieldMask{Paths: []string{"Summary"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := client.GetFlows(ctx, &observer.GetFlowsRequest{Number: 3, FieldMask: mask})
	must(t, err)
	var got []string
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		if f := r.GetFlow(); f != nil {
			if f.GetTime() != nil || f.GetNodeName() != "" || f.GetVerdict() != flow.Verdict_VERDICT_UNKNOWN {
				t.Errorf("flow has fields outside the mask: %v", f)
			}
			got = append(got, r.GetNodeName()+" "+f.GetSummary())
		}
	}
	if want := []string{"node-b 2", "node-a 3", "node-b 4"}; !slices.Equal(got, want) {
		t.Errorf("masked last 3: %q, want %q", got, want)
	}

	stream, err = client.GetFlows(ctx, &observer.GetFlowsRequest{FieldMask: &fieldmaskpb.FieldMask{Paths: []string{"summary"}}})
	must(t, err)
	for err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"summary"`) {
		t.Errorf("bad path through the relay: %v, want InvalidArgument naming it", err)
	}
}

// TestPoolServing: the relay's Observer health follows its nodes.
func TestPoolServing(t *testing.T) {
	c := newCluster(t)
	kp, err := tls.LoadX509KeyPair(c.pki.Path("relay.crt"), c.pki.Path("relay.key"))
	must(t, err)
	pool := NewPool(Options{PeerTarget: c.nodes[0].addr, PeerServerName: ServerName("hubble-peer", ""),
		TLS:         &tls.Config{Certificates: []tls.Certificate{kp}, RootCAs: c.caPool(t), MinVersion: tls.VersionTLS13},
		DialTimeout: 2 * time.Second, RetryTimeout: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if pool.Serving() {
		t.Fatal("serving before the Peer service was followed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pool.Run(ctx)
	testenv.Eventually(t, 10*time.Second, func() error {
		if !pool.Serving() {
			return fmt.Errorf("not serving")
		}
		return nil
	})
	for _, n := range c.nodes {
		n.srv.Stop()
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if pool.Serving() {
			return fmt.Errorf("serving with every node gone")
		}
		return nil
	})
}

// TestRelayAgentAndDebugEvents: the nodes' agent events in time order,
// the last or first number of the cluster; debug events answer empty.
func TestRelayAgentAndDebugEvents(t *testing.T) {
	c := newCluster(t)
	for ms := 1; ms <= 4; ms++ {
		n := c.nodes[(ms+1)%2]
		n.agent.Write(container.Event{Agent: &observer.GetAgentEventsResponse{NodeName: n.name,
			Time:       timestamppb.New(c.base.Add(time.Duration(ms) * time.Millisecond)),
			AgentEvent: &flow.AgentEvent{Type: flow.AgentEventType_ENDPOINT_CREATED}}})
	}
	client := c.relay(t, "relay")
	events := func(req *observer.GetAgentEventsRequest) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := client.GetAgentEvents(ctx, req)
		must(t, err)
		var out []string
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return out
			}
			must(t, err)
			out = append(out, fmt.Sprintf("%s %d", r.GetNodeName(), r.GetTime().AsTime().Sub(c.base).Milliseconds()))
		}
	}
	if got, want := events(&observer.GetAgentEventsRequest{}), []string{"node-a 1", "node-b 2", "node-a 3", "node-b 4"}; !slices.Equal(got, want) {
		t.Errorf("all: %q, want %q", got, want)
	}
	if got, want := events(&observer.GetAgentEventsRequest{Number: 3}), []string{"node-b 2", "node-a 3", "node-b 4"}; !slices.Equal(got, want) {
		t.Errorf("last 3: %q, want %q", got, want)
	}
	if got, want := events(&observer.GetAgentEventsRequest{Number: 1, First: true}), []string{"node-a 1"}; !slices.Equal(got, want) {
		t.Errorf("first: %q, want %q", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := client.GetDebugEvents(ctx, &observer.GetDebugEventsRequest{})
	must(t, err)
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("debug events: %v, want an empty answer", err)
	}
}
