package world

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/lab/internal/pki"
)

func TestFlagsRoundTrip(t *testing.T) {
	c := Config{
		Addrs:    []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")},
		HTTPPort: 80, HTTPSPort: 443, CertFile: "/state/pki/world.crt", KeyFile: "/state/pki/world.key",
	}
	got := DefaultConfig()
	fs := pflag.NewFlagSet("world-server", pflag.ContinueOnError)
	got.Flags(fs)
	if err := fs.Parse(c.Args()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("parsed %+v, want %+v", got, c)
	}
	for _, bad := range []Config{{}, {Addrs: c.Addrs, HTTPPort: 70000, CertFile: "c", KeyFile: "k"}, {Addrs: c.Addrs}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// The server answers 200 on any path over HTTP and HTTPS at each address, with a
// certificate that verifies against the CA for the names and the addresses.
func TestServe(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	names := []string{"world.cilium-lab.test", "other.world.cilium-lab.test"}
	kp, err := ca.Issue(pki.Request{CommonName: names[0], DNSNames: names, IPs: addrs, Usage: pki.ServerAuth})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := Config{Addrs: addrs, CertFile: filepath.Join(dir, "world.crt"), KeyFile: filepath.Join(dir, "world.key")}
	if err := pki.WriteKeyPair(c.CertFile, c.KeyFile, kp); err != nil {
		t.Fatal(err)
	}
	s, err := Listen(c)
	if err != nil {
		t.Fatalf("listen on %v: %v", addrs, err) // Linux's loopback holds all of 127/8
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	get := func(client *http.Client, url string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != Body {
			t.Errorf("GET %s: %d %q", url, resp.StatusCode, body)
		}
	}
	verified := func(serverName string, to netip.AddrPort) *http.Client {
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: serverName},
			// The names resolve to the server, as cluster DNS makes them.
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, to.String())
			},
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	for i, a := range addrs {
		httpAddr, httpsAddr := s.HTTPAddrs()[i], s.HTTPSAddrs()[i]
		if httpAddr.Addr() != a || httpsAddr.Addr() != a {
			t.Fatalf("listens on %s and %s, want %s", httpAddr, httpsAddr, a)
		}
		for _, path := range []string{"/", "/index.html", "/any/thing?x=1"} {
			get(plain, "http://"+httpAddr.String()+path)
			// By address, as pod-to-cidr curls it, and by name, as pod-to-world.
			get(verified("", httpsAddr), "https://"+httpsAddr.String()+path)
			get(verified(names[i], httpsAddr), "https://"+names[i]+path)
		}
	}

	// A name the certificate does not hold fails verification.
	_, err = verified("elsewhere.test", s.HTTPSAddrs()[0]).Get("https://elsewhere.test/")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET with a name not in the certificate: %v, want a certificate error", err)
	}
}
