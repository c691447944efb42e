package hubble

import (
	"github.com/cilium/statedb"

	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/cilium/api/v1/peer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
	"github.com/cilium-go/cilium/pkg/node"
)

type fakeNodes struct {
	mu      sync.Mutex
	nodes   []node.Node
	changed chan struct{} // closed by the next set
}

func (f *fakeNodes) Watch() ([]node.Node, *statedb.WatchSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	ws := statedb.NewWatchSet()
	ws.Add(f.changed)
	return append([]node.Node(nil), f.nodes...), ws
}

func (f *fakeNodes) set(nodes ...node.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = nodes
	if f.changed != nil {
		close(f.changed)
	}
	f.changed = make(chan struct{})
}

func peerNode(name, ip string) node.Node {
	return node.Node{Name: name, IPv4: netip.MustParseAddr(ip)}
}

// TestPeersFollowTheNodes: a relay learns every node's Hubble address,
// then each node that comes, moves or goes.
func TestPeersFollowTheNodes(t *testing.T) {
	nodes := &fakeNodes{}
	nodes.set(peerNode("b", "192.168.0.3"), peerNode("a", "192.168.0.2"), node.Node{Name: "no-address"})
	sock := filepath.Join(t.TempDir(), "hubble.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	peer.RegisterPeerServer(srv, &peerServer{nodes: nodes, port: 4244, tls: true})
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := peer.NewPeerClient(conn).Notify(ctx, &peer.NotifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		cn, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return cn.GetType().String() + " " + cn.GetName() + " " + cn.GetAddress() + " " + cn.GetTls().GetServerName()
	}
	for _, want := range []string{
		"PEER_ADDED a 192.168.0.2:4244 a.default.hubble-grpc.cilium.io",
		"PEER_ADDED b 192.168.0.3:4244 b.default.hubble-grpc.cilium.io",
	} {
		if got := next(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	nodes.set(peerNode("a", "192.168.0.9"), peerNode("c", "192.168.0.4"))
	for _, want := range []string{
		"PEER_UPDATED a 192.168.0.9:4244 a.default.hubble-grpc.cilium.io",
		"PEER_ADDED c 192.168.0.4:4244 c.default.hubble-grpc.cilium.io",
		"PEER_DELETED b 192.168.0.3:4244 ",
	} {
		if got := next(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// tlsFiles writes a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, and a client certificate of another CA.
func tlsFiles(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	ca := testenv.NewPKI(t, dir, "ca")
	ca.Issue(t, "server", x509.ExtKeyUsageServerAuth, nil, net.IPv4(127, 0, 0, 1))
	ca.Issue(t, "client", x509.ExtKeyUsageClientAuth, nil)
	testenv.NewPKI(t, dir, "other-ca").Issue(t, "intruder", x509.ExtKeyUsageClientAuth, nil)
	return dir
}

// TestListenAddressWantsMutualTLS: with client CAs, only a client whose
// certificate they signed gets an answer.
func TestListenAddressWantsMutualTLS(t *testing.T) {
	dir := tlsFiles(t)
	f := func(name string) string { return filepath.Join(dir, name) }
	cfg := Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 15, HubbleListenAddress: "127.0.0.1:0",
		HubbleTLSCertFile: f("server.crt"), HubbleTLSKeyFile: f("server.key"), HubbleTLSClientCAFiles: []string{f("ca.crt")}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	serverTLS, err := cfg.serverTLS(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := container.NewRing(15)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)))
	observer.RegisterObserverServer(srv, hubbleobserver.New(ring, "n1", Version))
	go srv.Serve(ln)
	defer srv.Stop()

	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(f("ca.crt"))
	pool.AppendCertsFromPEM(caPEM)
	status := func(client string) error {
		tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		if client != "" {
			cert, err := tls.LoadX509KeyPair(f(client+".crt"), f(client+".key"))
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = observer.NewObserverClient(conn).ServerStatus(ctx, &observer.ServerStatusRequest{})
		return err
	}
	if err := status("client"); err != nil {
		t.Fatalf("the CA's client: %v", err)
	}
	for _, c := range []string{"", "intruder"} {
		if err := status(c); err == nil {
			t.Errorf("client %q got an answer without a certificate of the CA", c)
		}
	}

	bad := []struct {
		c    Config
		want string
	}{
		{Config{HubbleListenAddress: "4244"}, "--hubble-listen-address"},
		{Config{HubbleListenAddress: ":4244"}, "--hubble-tls-cert-file"},
	}
	for _, b := range bad {
		b.c.EnableHubble, b.c.HubbleSocketPath, b.c.HubbleEventBufferCapacity = true, "/run/h.sock", 15
		if err := b.c.Validate(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: %v, want an error naming %s", b.c, err, b.want)
		}
	}
	noCA := cfg
	noCA.HubbleTLSClientCAFiles = []string{f("server.key")}
	if _, err := noCA.serverTLS(slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--hubble-tls-client-ca-files") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}
