package etcd

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cilium-go/cilium/lab/internal/pki"
)

func TestArgsRoundTrip(t *testing.T) {
	want := DefaultConfig()
	want.DataDir = "/state/etcd"
	want.CertFile, want.KeyFile, want.CAFile = "/p/etcd.crt", "/p/etcd.key", "/p/ca.crt"
	want.ClientAddr = netip.MustParseAddrPort("172.30.0.2:12379")
	want.UnsafeNoFsync = true

	var got Config
	fs := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
	got.Flags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]func(*Config){
		"no data dir": func(c *Config) { c.DataDir = "" },
		"no TLS":      func(c *Config) { c.CertFile = "" },
		"no CA":       func(c *Config) { c.CAFile = "" },
		"no port":     func(c *Config) { c.ClientAddr = netip.AddrPortFrom(c.ClientAddr.Addr(), 0) },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			c.DataDir, c.CertFile, c.KeyFile, c.CAFile = "/d", "/c", "/k", "/ca"
			change(&c)
			if err := c.Validate(); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// freePort asks the kernel for an unused loopback port. Another process could take
// it before etcd binds; on this test's scale that race is accepted.
func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// TestRunServesTLSWithClientAuth runs etcd on loopback with lab certificates: a
// client with a lab client certificate can write and read, one without is refused,
// and cancelling the context stops etcd cleanly.
func TestRunServesTLSWithClientAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	_, _, err = ca.Ensure(filepath.Join(dir, "etcd.crt"), filepath.Join(dir, "etcd.key"), pki.Request{
		CommonName: "etcd", IPs: []netip.Addr{lo}, Usage: pki.ServerAuth | pki.ClientAuth,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(pki.Request{CommonName: "apiserver", Usage: pki.ClientAuth})
	if err != nil {
		t.Fatal(err)
	}

	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.ClientAddr = netip.AddrPortFrom(lo, freePort(t))
	cfg.PeerAddr = netip.AddrPortFrom(lo, freePort(t))
	cfg.CertFile, cfg.KeyFile, cfg.CAFile = filepath.Join(dir, "etcd.crt"), filepath.Join(dir, "etcd.key"), filepath.Join(dir, pki.CACertFile)
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("etcd did not stop within 30s of cancellation")
		}
	})

	keyPEM, err := client.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := tls.X509KeyPair(client.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(certs []tls.Certificate) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{
			Endpoints:   []string{cfg.ClientURL()},
			DialTimeout: 2 * time.Second,
			TLS:         &tls.Config{RootCAs: ca.Pool(), Certificates: certs},
		})
	}

	cli, err := dial([]tls.Certificate{clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// etcd needs a moment to elect itself; retry the first write until a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		opCtx, opCancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cli.Put(opCtx, "/lab/k", "v")
		opCancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("put: %v", err)
		}
	}
	resp, err := cli.Get(ctx, "/lab/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get returned %+v", resp.Kvs)
	}

	anon, err := dial(nil)
	if err == nil {
		defer anon.Close()
		opCtx, opCancel := context.WithTimeout(ctx, 3*time.Second)
		defer opCancel()
		if _, err := anon.Get(opCtx, "/lab/k"); err == nil {
			t.Fatal("client without certificate was served")
		}
	}
}
