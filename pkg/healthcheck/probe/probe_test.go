package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// loopNet dials whatever address to one local listener: the tests' node.
type loopNet struct{ addr string }

func (n loopNet) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, n.addr)
}

func (loopNet) ListenICMP() (net.PacketConn, error) { return nil, errors.New("no ICMP here") }

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func TestResponderAnswersOnlyHello(t *testing.T) {
	r := NewResponder()
	addr := serve(t, r.srv.Handler)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/hello", http.StatusOK},
		{http.MethodHead, "/hello", http.StatusOK},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/v1beta/status", http.StatusNotFound},
		{http.MethodPost, "/hello", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
}

func TestHelloNeeds200(t *testing.T) {
	ip := netip.MustParseAddr("192.0.2.1")
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{"ok", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hello" || r.Host != "192.0.2.1:4240" {
				w.WriteHeader(http.StatusTeapot)
			}
		}, ""},
		{"not found", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }, "404 Not Found"},
		// A responder that sends the prober elsewhere is not answering.
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://198.51.100.1/", http.StatusFound)
		}, "302 Found"},
	} {
		p := New(loopNet{addr: serve(t, tc.handler)}, 0)
		rtt, err := p.Hello(context.Background(), ip)
		switch {
		case tc.wantErr == "" && (err != nil || rtt <= 0):
			t.Errorf("%s: %v %v", tc.name, rtt, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// A failed path has a status message (unreachable to Cilium's clients),
// a reachable one a latency and none.
func TestProbeReportsInCiliumsTerms(t *testing.T) {
	p := New(loopNet{addr: serve(t, NewResponder().srv.Handler)}, 0)
	st := p.Probe(context.Background(), []Target{{Name: "a", NodeIP: netip.MustParseAddr("192.0.2.1"),
		HealthIP: netip.MustParseAddr("10.0.0.9")}, {Name: "b", NodeIP: netip.MustParseAddr("192.0.2.2")}})
	if len(st) != 2 || st[0].Name != "a" || st[1].Name != "b" {
		t.Fatalf("statuses %+v", st)
	}
	host := st[0].Host.PrimaryAddress
	if host.IP != "192.0.2.1" || host.HTTP.Status != "" || host.HTTP.Latency <= 0 || host.HTTP.LastProbed == "" {
		t.Errorf("a's host HTTP %+v", host.HTTP)
	}
	if host.Icmp.Status == "" || host.Icmp.Latency != 0 {
		t.Errorf("a's host ICMP without a socket: %+v", host.Icmp)
	}
	if ep := st[0].HealthEndpoint; ep == nil || ep.PrimaryAddress.IP != "10.0.0.9" || st[0].Endpoint != ep.PrimaryAddress {
		t.Errorf("a's health endpoint %+v, deprecated field %+v", ep, st[0].Endpoint)
	}
	if st[1].HealthEndpoint != nil || st[1].Endpoint != nil {
		t.Errorf("b has no health endpoint: %+v", st[1])
	}
}
