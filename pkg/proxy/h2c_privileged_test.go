package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/l7"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// waiters is how many requests for /public/wait the server holds until
// they are all there: they pass only if the proxy carries them at once.
const waiters = 4

// serveH2C serves HTTP/1.1 and h2c on the pod's port: every request is
// answered with the client's address, the protocol, the request line,
// the body and the headers the test looks for; those for /public/wait
// once waiters of them have come. It counts the connections it accepted.
func serveH2C(t *testing.T, pod *dptest.Pod, port int) *atomic.Int32 {
	t.Helper()
	var ln net.Listener
	err := netnamespace.Do(pod.NS, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(pod.IP, uint16(port)).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	conns := &atomic.Int32{}
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	protos := &http.Protocols{}
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: protos,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/public/wait" {
				mu.Lock()
				if arrived++; arrived == waiters {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
				case <-r.Context().Done():
					return
				}
			}
			body, _ := io.ReadAll(r.Body)
			for _, k := range []string{"X-Added", "Upgrade", "Http2-Settings", "User-Agent"} {
				w.Header()[k+"-Seen"] = r.Header[k]
			}
			fmt.Fprintf(w, "%s %s %s %s %s", r.RemoteAddr, r.Proto, r.Method, r.URL.RequestURI(), body)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return conns
}

// h2cClient speaks HTTP/2 with prior knowledge from the pod, over the
// connections it counts.
func h2cClient(pod *dptest.Pod) (*http.Client, *atomic.Int32) {
	dials := &atomic.Int32{}
	protos := &http.Protocols{}
	protos.SetUnencryptedHTTP2(true)
	d := &net.Dialer{Timeout: dptest.ReplyWait}
	return &http.Client{Timeout: dptest.ReplyWait, Transport: &http.Transport{Protocols: protos,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			dials.Add(1)
			err = netnamespace.Do(pod.NS, func() (err error) {
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}, dials
}

// get sends a request and returns the response with its body read.
func get(t *testing.T, cl *http.Client, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp, string(b)
}

// A pod's h2c requests (HTTP/2 with prior knowledge) go through the HTTP
// proxy on its node: each stream is judged on its own by the HTTP rules,
// the denied ones get 403 Access denied on their stream while the
// connection goes on, the allowed ones reach the server over HTTP/2 from
// the pod's address, concurrently, on one connection; each request and
// response is recorded as HTTP/2. An HTTP/1.1 client's offer to upgrade
// to h2c does not reach the server.
func TestPrivilegedHTTPProxyH2C(t *testing.T) {
	c := newCluster(t, dptest.Options{Mode: spec.Tunnel, PolicyEgress: true})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	pod, server := n1.Pods[0], n2.Pods[0]
	conns := serveH2C(t, server, 8080)
	rec := &recorder{}
	px := startProxy(t, c, n1, rec)
	rules := &policy.L7Rules{Parser: policy.ParserHTTP, HTTP: []l7.HTTPRule{
		{Method: "GET", Path: "/public.*"},
		{Method: "POST", Path: "/submit", Headers: []string{"X-Token: secret"}},
		{Method: "GET", Path: "/edited", HeaderMatches: []l7.HeaderMatch{{Name: "X-Added", Value: "yes", Mismatch: l7.MismatchAdd}}},
	}}
	err := px.SetPolicy(proxy.Policy{Revision: 1, Endpoints: []proxy.Endpoint{{ID: pod.ID, Identity: pod.Identity, IPv4: pod.IP,
		Ports: []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 8080,
			Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{server.Identity}, L7: rules}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.DP.Maps().SetPolicy(pod.ID, []spec.PolicyEntry{
		{Direction: spec.Egress, Identity: server.Identity, Protocol: spec.ProtoTCP, Port: 8080, ProxyPort: httpProxyPort},
	}); err != nil {
		t.Fatal(err)
	}
	cl, dials := h2cClient(pod)
	base := "http://" + netip.AddrPortFrom(server.IP, 8080).String()

	// One after the other on the connection, allowed and denied.
	for _, tc := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "/public/a", "", 200},
		{"GET", "/private", "", 403},
		{"POST", "/submit", "", 403},
		{"POST", "/submit", "secret", 200},
		{"DELETE", "/public/a", "", 403},
		{"GET", "/public?q=1", "", 200},
	} {
		var header []string
		if tc.token != "" {
			header = []string{"X-Token", tc.token}
		}
		resp, body := get(t, cl, tc.method, base+tc.path, "body", header...)
		if resp.StatusCode != tc.code || resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: %s %d %q, want HTTP/2 %d", tc.method, tc.path, resp.Proto, resp.StatusCode, body, tc.code)
		}
		want := "Access denied\r\n"
		if tc.code == 200 {
			want = fmt.Sprintf("%s:%%d HTTP/2.0 %s %s body", pod.IP, tc.method, tc.path)
			var port int
			if _, err := fmt.Sscanf(body, want, &port); err != nil || fmt.Sprintf(want, port) != body {
				t.Fatalf("%s %s: body %q, want %q (HTTP/2 from the pod's address)", tc.method, tc.path, body, want)
			}
			if ua := resp.Header["User-Agent-Seen"]; len(ua) != 1 || !strings.HasPrefix(ua[0], "Go-http-client/") {
				t.Fatalf("%s %s: the server saw User-Agent %q, want the client's", tc.method, tc.path, ua)
			}
		} else if body != want {
			t.Fatalf("%s %s: body %q, want %q", tc.method, tc.path, body, want)
		}
	}
	resp, _ := get(t, cl, "GET", base+"/edited", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Added-Seen") != "yes" {
		t.Fatalf("GET /edited: %d, the server saw X-Added %q, want the rule's edit", resp.StatusCode, resp.Header["X-Added-Seen"])
	}

	// At once on the connection: the waiting ones pass only together.
	codes := make(chan int, 2*waiters)
	var wg sync.WaitGroup
	for i := range 2 * waiters {
		path := "/public/wait"
		if i%2 == 1 {
			path = "/private"
		}
		wg.Go(func() {
			resp, err := cl.Get(base + path)
			if err != nil {
				t.Errorf("GET %s: %v", path, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if want := map[string]int{"/public/wait": 200, "/private": 403}[path]; resp.StatusCode != want {
				t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
			}
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n, m := dials.Load(), conns.Load(); n != 1 || m != 1 {
		t.Fatalf("the client opened %d connections and the server saw %d, want one each", n, m)
	}

	records, _ := rec.snapshot()
	if len(records) != 2*(7+2*waiters) {
		t.Fatalf("%d records, want %d: %+v", len(records), 2*(7+2*waiters), records)
	}
	count := map[string]int{}
	for _, r := range records {
		if r.HTTP == nil || r.HTTP.Protocol != "HTTP/2" {
			t.Fatalf("record %+v, want HTTP/2", r)
		}
		switch r.Type {
		case accesslog.Request:
			if r.Src.Addr() != pod.IP || r.Dst != netip.AddrPortFrom(server.IP, 8080) || r.SrcEndpoint != pod.ID || r.SrcIdentity != pod.Identity || r.DstIdentity != server.Identity {
				t.Fatalf("request record %+v", r)
			}
			count[fmt.Sprintf("request %d", r.Verdict)]++
		case accesslog.Response:
			if r.Dst.Addr() != pod.IP || r.Src != netip.AddrPortFrom(server.IP, 8080) || r.Latency <= 0 ||
				(r.Verdict == accesslog.Denied) != (r.HTTP.Code == 403) {
				t.Fatalf("response record %+v", r)
			}
			count[fmt.Sprintf("response %d", r.Verdict)]++
		}
	}
	denied := 3 + waiters
	want := map[string]int{
		fmt.Sprintf("request %d", accesslog.Denied): denied, fmt.Sprintf("request %d", accesslog.Forwarded): 7 + 2*waiters - denied,
		fmt.Sprintf("response %d", accesslog.Denied): denied, fmt.Sprintf("response %d", accesslog.Forwarded): 7 + 2*waiters - denied,
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("records by type and verdict %v, want %v", count, want)
	}

	// HTTP/1.1 with an offer to upgrade to h2c: the server never sees
	// it (it would take the connection out of the proxy's judgment), the
	// answer is HTTP/1.1.
	resp, body := get(t, client(pod), "GET", base+"/public/up", "", "Connection", "Upgrade, HTTP2-Settings",
		"Upgrade", "h2c", "HTTP2-Settings", "AAMAAABkAAQAAP__")
	if resp.StatusCode != 200 || resp.ProtoMajor != 1 || !strings.Contains(body, " HTTP/1.1 GET /public/up") ||
		resp.Header["Upgrade-Seen"] != nil || resp.Header["Http2-Settings-Seen"] != nil {
		t.Fatalf("GET /public/up with an h2c upgrade: %s %d %q %v", resp.Proto, resp.StatusCode, body, resp.Header)
	}
}
