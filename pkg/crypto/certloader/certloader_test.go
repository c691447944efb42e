package certloader

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
)

// pair is a CA's server and client certificates, as a Secret mounts them.
func pair(t *testing.T, ca string) *testenv.PKI {
	p := testenv.NewPKI(t, t.TempDir(), ca)
	p.Issue(t, "server", x509.ExtKeyUsageServerAuth, []string{"node1.hubble-grpc.cilium.io"})
	p.Issue(t, "client", x509.ExtKeyUsageClientAuth, []string{"relay.hubble-grpc.cilium.io"})
	p.Issue(t, "elsewhere", x509.ExtKeyUsageServerAuth, []string{"node2.hubble-grpc.cilium.io"})
	return p
}

// mount puts the files of p in dir under the names the loaders read, by
// rename, as Kubernetes swaps a Secret's files.
func mount(t *testing.T, dir string, p *testenv.PKI, ca string, names ...string) {
	t.Helper()
	for _, n := range append([]string{ca + ".crt"}, names...) {
		b, err := os.ReadFile(p.Path(n))
		if err != nil {
			t.Fatal(err)
		}
		to := n
		if n == ca+".crt" {
			to = "ca.crt"
		}
		tmp := filepath.Join(dir, "."+to)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
}

func loader(t *testing.T, dir, name string, log *slog.Logger) *Loader {
	t.Helper()
	l, err := New(Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CertFlags: "--cert",
		CAs: []string{filepath.Join(dir, "ca.crt")}, CAFlag: "--ca"}, log)
	if err != nil {
		t.Fatal(err)
	}
	l.every = 0 // every handshake looks at the files
	return l
}

// handshake runs a TLS handshake between the two configurations and
// returns the server certificate's issuer as the client saw it.
func handshake(server, client *tls.Config) (string, error) {
	// Loopback TCP, which buffers: a side's alert does not wait for the
	// other to read.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return "", err
	}
	defer b.Close()
	a, err := ln.Accept()
	if err != nil {
		return "", err
	}
	defer a.Close()
	deadline := time.Now().Add(10 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	srvErr := make(chan error, 1)
	go func() {
		s := tls.Server(a, server)
		err := s.Handshake()
		if err == nil {
			// The client's verdict on the server's certificate comes
			// after the server's handshake ended: wait for it.
			_, err = s.Read(make([]byte, 1))
		}
		srvErr <- err
		a.Close()
	}()
	c := tls.Client(b, client)
	if err := c.Handshake(); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return "", err
	}
	if err := <-srvErr; err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
}

// TestRenewedFilesReachRunningPeers: a server and a client keep their
// configurations while the CA, and both certificates with it, are
// issued again; the next handshake uses the new ones, and a side that
// still trusts the old CA only is refused.
func TestRenewedFilesReachRunningPeers(t *testing.T) {
	srvDir, cliDir := t.TempDir(), t.TempDir()
	old := pair(t, "old-ca")
	mount(t, srvDir, old, "old-ca", "server.crt", "server.key")
	mount(t, cliDir, old, "old-ca", "client.crt", "client.key")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	server, client := loader(t, srvDir, "server", log).ServerConfig(), loader(t, cliDir, "client", log).ClientConfig()
	client.ServerName = "node1.hubble-grpc.cilium.io"

	if issuer, err := handshake(server, client); err != nil || issuer != "old-ca" {
		t.Fatalf("before the renewal: %v, the server's certificate from %q", err, issuer)
	}
	// A client that keeps the old files: the renewed server refuses it.
	staleDir := t.TempDir()
	mount(t, staleDir, old, "old-ca", "client.crt", "client.key")
	staleCfg := loader(t, staleDir, "client", log).ClientConfig()
	staleCfg.ServerName = client.ServerName

	renewed := pair(t, "new-ca")
	mount(t, srvDir, renewed, "new-ca", "server.crt", "server.key")
	mount(t, cliDir, renewed, "new-ca", "client.crt", "client.key")
	if issuer, err := handshake(server, client); err != nil || issuer != "new-ca" {
		t.Fatalf("after the renewal: %v, the server's certificate from %q", err, issuer)
	}
	if _, err := handshake(server, staleCfg); err == nil {
		t.Error("a client with the old CA's certificate got through the renewed server")
	}
	if !strings.Contains(logs.String(), "TLS files reloaded") {
		t.Errorf("no reload logged:\n%s", logs.String())
	}

	// Files that do not load leave the last good ones in use, and say so
	// once.
	if err := os.WriteFile(filepath.Join(srvDir, "server.crt"), []byte("half a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if issuer, err := handshake(server, client); err != nil || issuer != "new-ca" {
			t.Fatalf("with a broken certificate file: %v, %q; want the last good certificate", err, issuer)
		}
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("the broken files were told of %d times, want once:\n%s", n, logs.String())
	}
}

// TestForgedPeersAreRefused: a client certificate of another CA, none at
// all, a server certificate for another name, and a client that set no
// name to verify.
func TestForgedPeersAreRefused(t *testing.T) {
	dir, otherDir := t.TempDir(), t.TempDir()
	ca := pair(t, "ca")
	mount(t, dir, ca, "ca", "server.crt", "server.key", "client.crt", "client.key", "elsewhere.crt", "elsewhere.key")
	mount(t, otherDir, pair(t, "intruder-ca"), "intruder-ca", "client.crt", "client.key")
	log := slog.New(slog.DiscardHandler)
	server := loader(t, dir, "server", log).ServerConfig()
	client := loader(t, dir, "client", log).ClientConfig()
	client.ServerName = "node1.hubble-grpc.cilium.io"
	if _, err := handshake(server, client); err != nil {
		t.Fatalf("the CA's own client: %v", err)
	}

	intruder := loader(t, otherDir, "client", log).ClientConfig()
	// It trusts the real CA, so that only its own certificate is wrong.
	intruder.InsecureSkipVerify, intruder.VerifyConnection = true, nil
	intruder.ServerName = client.ServerName
	if _, err := handshake(server, intruder); err == nil {
		t.Error("a client certificate of another CA got through")
	}
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if _, err := handshake(server, noCert); err == nil {
		t.Error("a client without a certificate got through")
	}

	elsewhere := loader(t, dir, "elsewhere", log).ServerConfig()
	if _, err := handshake(elsewhere, client); err == nil || !strings.Contains(err.Error(), "node1") {
		t.Errorf("a server certificate for another node: %v, want refused for its name", err)
	}
	unnamed := loader(t, dir, "client", log).ClientConfig()
	if _, err := handshake(server, unnamed); err == nil || !strings.Contains(err.Error(), "no server name") {
		t.Errorf("a client without a server name: %v, want refused", err)
	}

	if _, err := New(Files{Cert: filepath.Join(dir, "server.crt"), Key: filepath.Join(dir, "client.key"), CertFlags: "--cert"}, log); err == nil ||
		!strings.Contains(err.Error(), "--cert") {
		t.Errorf("a key that is not the certificate's: %v, want an error naming --cert", err)
	}
}
