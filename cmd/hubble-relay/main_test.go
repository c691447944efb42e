package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/hubble/relay"
)

// configOf parses args as serve's flags.
func configOf(t *testing.T, args ...string) *config {
	t.Helper()
	c := &config{}
	serve, _, err := newCommand(c).Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.ParseFlags(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return c
}

// listen listens on a free loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startRelay serves c on loopback ports and returns the relay's address
// and its health port's.
func startRelay(t *testing.T, c *config) (string, string) {
	t.Helper()
	addr, _, healthAddr := startRelayWithLocal(t, c, nil)
	return addr, healthAddr
}

// startRelayWithLocal is startRelay that also serves on localLn, and
// returns its address too.
func startRelayWithLocal(t *testing.T, c *config, localLn net.Listener) (addr, localAddr, healthAddr string) {
	t.Helper()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	ln, healthLn := listen(t), listen(t)
	if localLn != nil {
		localAddr = localLn.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.serve(ctx, slog.New(slog.DiscardHandler), ln, localLn, healthLn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), localAddr, healthLn.Addr().String()
}

// status asks the relay at addr for its status over a new connection
// with creds.
func status(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = observer.NewObserverClient(conn).ServerStatus(ctx, &observer.ServerStatusRequest{})
	return err
}

func pool(t *testing.T, files ...string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p.AppendCertsFromPEM(pem)
	}
	return p
}

// TestRelayRefusesClientsWithoutTheCAsCertificate: with
// --tls-relay-client-ca-files the relay serves a client whose
// certificate those CAs signed, and refuses one in plaintext, one
// without a certificate and one of another CA; a renewed CA file counts
// from the next handshake, without a restart. Probes reach the health
// port in plaintext.
func TestRelayRefusesClientsWithoutTheCAsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewPKI(t, dir, "ca")
	ca.Issue(t, "relay-server", x509.ExtKeyUsageServerAuth, []string{"*.hubble-relay.cilium.io"})
	ca.Issue(t, "cli", x509.ExtKeyUsageClientAuth, nil)
	testenv.NewPKI(t, dir, "other-ca").Issue(t, "intruder", x509.ExtKeyUsageClientAuth, nil)
	clientCAs := ca.Path("client-cas.crt")
	copyFile(t, ca.Path("ca.crt"), clientCAs)

	addr, healthAddr := startRelay(t, configOf(t, "--peer-service=unix://"+ca.Path("no.sock"), "--disable-client-tls",
		"--tls-relay-server-cert-file="+ca.Path("relay-server.crt"), "--tls-relay-server-key-file="+ca.Path("relay-server.key"),
		"--tls-relay-client-ca-files="+clientCAs))
	withCert := func(name string) credentials.TransportCredentials {
		cfg := &tls.Config{RootCAs: pool(t, ca.Path("ca.crt")), ServerName: "hubble.hubble-relay.cilium.io", MinVersion: tls.VersionTLS13}
		if name != "" {
			kp, err := tls.LoadX509KeyPair(ca.Path(name+".crt"), ca.Path(name+".key"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		return credentials.NewTLS(cfg)
	}

	if err := status(addr, withCert("cli")); err != nil {
		t.Fatalf("a client with the CA's certificate: %v", err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"in plaintext": insecure.NewCredentials(), "without a certificate": withCert(""), "of another CA": withCert("intruder"),
	} {
		if err := status(addr, creds); err == nil {
			t.Errorf("a client %s was served", name)
		}
	}

	// The CA is renewed: a client of the new CA is served from the next
	// handshake on, and the old CA's no longer.
	renewed := testenv.NewPKI(t, dir, "renewed-ca")
	renewed.Issue(t, "renewed-cli", x509.ExtKeyUsageClientAuth, nil)
	copyFile(t, renewed.Path("renewed-ca.crt"), clientCAs)
	testenv.Eventually(t, 10*time.Second, func() error { return status(addr, withCert("renewed-cli")) })
	if err := status(addr, withCert("cli")); err == nil {
		t.Error("a client of the replaced CA was served")
	}

	conn, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil ||
		resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health port: %v, %v", resp, err)
	}
	// The Observer's name, which `hubble status` asks about, is not
	// serving: the relay has no Peer service, so no nodes.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: relay.HealthServiceName})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health of %s without nodes: %v, %v", relay.HealthServiceName, resp, err)
	}
}

// TestRelayServesPlaintextOnLoopback: with --local-listen-address the
// relay serves the same API in plaintext there (a port-forward's
// `hubble observe`), with the Observer's health, while its network
// listener still refuses a client in plaintext or without a certificate.
func TestRelayServesPlaintextOnLoopback(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewPKI(t, dir, "ca")
	ca.Issue(t, "relay-server", x509.ExtKeyUsageServerAuth, []string{"*.hubble-relay.cilium.io"})
	localLn := listen(t)
	addr, localAddr, _ := startRelayWithLocal(t, configOf(t, "--peer-service=unix://"+ca.Path("no.sock"), "--disable-client-tls",
		"--listen-address=10.0.0.5:4245", "--local-listen-address="+localLn.Addr().String(),
		"--tls-relay-server-cert-file="+ca.Path("relay-server.crt"), "--tls-relay-server-key-file="+ca.Path("relay-server.key"),
		"--tls-relay-client-ca-files="+ca.Path("ca.crt")), localLn)

	if err := status(localAddr, insecure.NewCredentials()); err != nil {
		t.Errorf("plaintext on the loopback listener: %v", err)
	}
	conn, err := grpc.NewClient(localAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: relay.HealthServiceName}); err != nil ||
		resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health of %s on the loopback listener, without nodes: %v, %v", relay.HealthServiceName, resp, err)
	}

	noCert := credentials.NewTLS(&tls.Config{RootCAs: pool(t, ca.Path("ca.crt")), ServerName: "hubble.hubble-relay.cilium.io", MinVersion: tls.VersionTLS13})
	for name, creds := range map[string]credentials.TransportCredentials{"in plaintext": insecure.NewCredentials(), "without a certificate": noCert} {
		if err := status(addr, creds); err == nil {
			t.Errorf("the network listener served a client %s", name)
		}
	}
}

// copyFile replaces dst by a new file, as Kubernetes swaps a Secret's.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".new", dst); err != nil {
		t.Fatal(err)
	}
}

func TestServerTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewPKI(t, dir, "ca")
	ca.Issue(t, "relay-server", x509.ExtKeyUsageServerAuth, []string{"*.hubble-relay.cilium.io"})
	cert, key := "--tls-relay-server-cert-file="+ca.Path("relay-server.crt"), "--tls-relay-server-key-file="+ca.Path("relay-server.key")
	for _, tc := range []struct {
		args []string
		want string // in the error; empty: none
	}{
		{nil, "--tls-relay-server-cert-file and --tls-relay-server-key-file (or --disable-server-tls)"},
		{[]string{cert}, "--tls-relay-server-key-file"},
		{[]string{cert, key}, ""},
		{[]string{cert, key, "--tls-relay-client-ca-files=" + ca.Path("ca.crt")}, ""},
		{[]string{cert, key, "--tls-relay-client-ca-files=" + ca.Path("none.crt")}, "--tls-relay-client-ca-files"},
		{[]string{"--disable-server-tls"}, ""},
		{[]string{"--disable-server-tls", "--tls-relay-client-ca-files=" + ca.Path("ca.crt")}, "needs server TLS"},
		{[]string{"--max-concurrent-streams=0"}, "--max-concurrent-streams 0"},
		{[]string{"--max-concurrent-streams=8", "--max-concurrent-streams-per-client=9"}, "--max-concurrent-streams-per-client 9"},
		// The plaintext listener stays on loopback, and off the network
		// listener's port when that one takes every address.
		{[]string{cert, key, "--listen-address=10.0.0.5:4245", "--local-listen-address=127.0.0.1:4245"}, ""},
		{[]string{cert, key, "--listen-address=[fd00::5]:4245", "--local-listen-address=[::1]:4245"}, ""},
		{[]string{cert, key, "--local-listen-address=127.0.0.1:4246"}, ""},
		{[]string{cert, key, "--local-listen-address=127.0.0.1:4245"}, "--listen-address \":4245\" takes every address"},
		{[]string{cert, key, "--listen-address=0.0.0.0:4245", "--local-listen-address=127.0.0.1:4245"}, "$(POD_IP):4245"},
		{[]string{cert, key, "--local-listen-address=0.0.0.0:4245"}, "--local-listen-address \"0.0.0.0:4245\": want a loopback address"},
		{[]string{cert, key, "--local-listen-address=10.0.0.5:4245"}, "must not be reachable from the network"},
		{[]string{cert, key, "--local-listen-address=:4245"}, "--local-listen-address"},
		{[]string{cert, key, "--local-listen-address=localhost:4245"}, "--local-listen-address"},
	} {
		c := configOf(t, tc.args...)
		err := c.validate()
		if err == nil {
			_, err = c.serverOptions(slog.New(slog.DiscardHandler))
		}
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
