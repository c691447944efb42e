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
	"strconv"
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
		DNSPort: 53, Hosts: []string{"world.test=192.0.2.1", "other.test=192.0.2.2"}, Aliases: []string{"alias.test=world.test"},
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

// startWorld serves the world on 127.0.0.1 and 127.0.0.2 with a certificate
// for names from ca, until the test ends.
func startWorld(t *testing.T, ca *pki.CA, names []string) *Server {
	t.Helper()
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
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
	for i, a := range addrs {
		if s.HTTPAddrs()[i].Addr() != a || s.HTTPSAddrs()[i].Addr() != a {
			t.Fatalf("listens on %s and %s, want %s", s.HTTPAddrs()[i], s.HTTPSAddrs()[i], a)
		}
	}
	return s
}

// h2Client trusts ca and offers h2 first, as curl does; names resolve to to,
// as cluster DNS makes them.
func h2Client(t *testing.T, ca *pki.CA, serverName string, to netip.AddrPort) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool(), ServerName: serverName},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, to.String())
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// The server answers 200 on any path over HTTP and HTTPS at each address, with a
// certificate that verifies against the CA for the names and the addresses.
func TestServe(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"world.cilium-lab.test", "other.world.cilium-lab.test"}
	s := startWorld(t, ca, names)

	get := func(client *http.Client, url, proto string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != Body || resp.Proto != proto {
			t.Errorf("GET %s: %s %d %q, want %s 200", url, resp.Proto, resp.StatusCode, body, proto)
		}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	for i := range names {
		httpAddr, httpsAddr := s.HTTPAddrs()[i], s.HTTPSAddrs()[i]
		for _, path := range []string{"/", "/index.html", "/any/thing?x=1"} {
			get(plain, "http://"+httpAddr.String()+path, "HTTP/1.1")
			// By address, as pod-to-cidr curls it, and by name, as pod-to-world.
			get(h2Client(t, ca, "", httpsAddr), "https://"+httpsAddr.String()+path, "HTTP/2.0")
			get(h2Client(t, ca, names[i], httpsAddr), "https://"+names[i]+path, "HTTP/2.0")
		}
	}

	// A name the certificate does not hold fails verification.
	_, err = h2Client(t, ca, "elsewhere.test", s.HTTPSAddrs()[0]).Get("https://elsewhere.test/")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET with a name not in the certificate: %v, want a certificate error", err)
	}
}

// HTTP/2 over TLS works on every start, whichever listener's goroutine runs
// first: a server shared by plain and TLS listeners offered h2 and then closed
// the connections that took it, on some starts and not others.
func TestServeHTTP2EveryStart(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			s := startWorld(t, ca, []string{"world.cilium-lab.test"})
			for _, to := range s.HTTPSAddrs() {
				resp, err := h2Client(t, ca, "", to).Get("https://" + to.String() + "/")
				if err != nil {
					t.Fatalf("start %d: GET over h2: %v", i, err)
				}
				resp.Body.Close()
				if resp.Proto != "HTTP/2.0" {
					t.Errorf("start %d: %s, want HTTP/2.0", i, resp.Proto)
				}
			}
		})
	}
}
