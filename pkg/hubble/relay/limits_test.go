package relay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/cilium-go/cilium/internal/testenv"
)

// TestStreamsAreBoundedPerClientAndInTotal: a client (its certificate,
// over any number of connections) gets MaxStreamsPerClient streams, the
// next is refused naming the limit; another client still gets streams up
// to MaxStreams; a closed stream frees its place.
func TestStreamsAreBoundedPerClientAndInTotal(t *testing.T) {
	c := newCluster(t)
	c.pki.Issue(t, "relay-server", x509.ExtKeyUsageServerAuth, []string{"*.hubble-relay.cilium.io"})
	for _, name := range []string{"alice", "bob"} {
		c.pki.Issue(t, name, x509.ExtKeyUsageClientAuth, nil)
	}
	srvCert, err := tls.LoadX509KeyPair(c.pki.Path("relay-server.crt"), c.pki.Path("relay-server.key"))
	must(t, err)
	addr := c.serveRelay(t, "relay",
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: c.caPool(t),
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13})),
		grpc.StreamInterceptor(Limits{MaxStreams: 3, MaxStreamsPerClient: 2}.StreamInterceptor()))
	// dial is a new connection with name's certificate.
	dial := func(name string) observer.ObserverClient {
		kp, err := tls.LoadX509KeyPair(c.pki.Path(name+".crt"), c.pki.Path(name+".key"))
		must(t, err)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp},
			RootCAs: c.caPool(t), ServerName: "ui.hubble-relay.cilium.io", MinVersion: tls.VersionTLS13})))
		must(t, err)
		t.Cleanup(func() { conn.Close() })
		return observer.NewObserverClient(conn)
	}
	// open starts a followed stream and waits for its first answer.
	open := func(client observer.ObserverClient) (context.CancelFunc, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		stream, err := client.GetFlows(ctx, &observer.GetFlowsRequest{Follow: true})
		if err == nil {
			_, err = stream.Recv()
		}
		return cancel, err
	}
	refused := func(err error, limit string) bool {
		return status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), limit)
	}
	alice1, alice2, bob := dial("alice"), dial("alice"), dial("bob")
	c.waitForNodes(t, alice1) // unary calls are not counted

	closeFirst, err := open(alice1)
	must(t, err)
	if _, err := open(alice2); err != nil {
		t.Fatalf("alice's second stream: %v", err)
	}
	if _, err := open(alice2); !refused(err, "--max-concurrent-streams-per-client") {
		t.Fatalf("alice's third stream: %v, want ResourceExhausted naming --max-concurrent-streams-per-client", err)
	}
	if _, err := open(bob); err != nil {
		t.Fatalf("bob's first stream: %v", err)
	}
	if _, err := open(bob); !refused(err, "--max-concurrent-streams)") {
		t.Fatalf("a fourth stream of all: %v, want ResourceExhausted naming --max-concurrent-streams", err)
	}
	closeFirst()
	testenv.Eventually(t, 10*time.Second, func() error {
		_, err := open(bob)
		return err
	})
}

func TestLimitsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{MaxStreams: 0, MaxStreamsPerClient: 1}, "--max-concurrent-streams 0"},
		{Limits{MaxStreams: 4, MaxStreamsPerClient: 0}, "--max-concurrent-streams-per-client 0"},
		{Limits{MaxStreams: 4, MaxStreamsPerClient: 5}, "--max-concurrent-streams-per-client 5"},
		{Limits{MaxStreams: 4, MaxStreamsPerClient: 4}, ""},
	} {
		err := tc.l.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
}
