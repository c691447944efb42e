package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
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

// serveHTTP answers every request with the client's address and the
// request line, and counts the connections it accepted.
func serveHTTP(t *testing.T, pod *dptest.Pod, port int) *atomic.Int32 {
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
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s %s", r.RemoteAddr, r.Method, r.URL.RequestURI(), body)
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

// client is an HTTP client in the pod's namespace that keeps one
// connection alive.
func client(pod *dptest.Pod) *http.Client {
	d := &net.Dialer{Timeout: dptest.ReplyWait}
	return &http.Client{Timeout: dptest.ReplyWait, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = netnamespace.Do(pod.NS, func() (err error) {
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
}

// submitRules allow what submitCases expect.
var submitRules = &policy.L7Rules{Parser: policy.ParserHTTP, HTTP: []l7.HTTPRule{
	{Method: "GET", Path: "/public.*"},
	{Method: "POST", Path: "/submit", Headers: []string{"X-Token: secret"}},
}}

type requestCase struct {
	method, path, token string
	code                int
}

var submitCases = []requestCase{
	{"GET", "/public/a", "", 200},
	{"GET", "/private", "", 403},
	{"POST", "/submit", "", 403},
	{"POST", "/submit", "secret", 200},
	{"DELETE", "/public/a", "", 403},
	{"GET", "/public?q=1", "", 200},
}

// checkRequests sends the cases from pod to server's port 8080 (a
// serveHTTP) over one kept-alive connection and checks the answers: the
// server's, which saw the pod's address, or the proxy's 403.
func checkRequests(t *testing.T, pod, server *dptest.Pod, cases []requestCase) {
	t.Helper()
	cl := client(pod)
	base := "http://" + netip.AddrPortFrom(server.IP, 8080).String()
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader("body"))
		if tc.token != "" {
			req.Header.Set("X-Token", tc.token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Fatalf("%s %s: %d %q, want %d", tc.method, tc.path, resp.StatusCode, body, tc.code)
		}
		want := "Access denied\r\n"
		if tc.code == 200 {
			want = fmt.Sprintf("%s %s %s body", pod.IP, tc.method, tc.path)
		}
		if got := string(body); !strings.HasPrefix(got, strings.SplitN(want, " ", 2)[0]) || !strings.HasSuffix(got, strings.SplitN(want, " ", 2)[1]) {
			t.Fatalf("%s %s: body %q, want %q (the server sees the pod's address)", tc.method, tc.path, got, want)
		}
	}
}

// A pod's HTTP requests go through the HTTP proxy on its node: each
// request of a kept-alive connection is judged on its own, the allowed
// ones reach the server from the pod's address over one connection, the
// others get 403 Access denied from the proxy.
func TestPrivilegedHTTPProxy(t *testing.T) {
	for _, mode := range []spec.RoutingMode{spec.Native, spec.Tunnel} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode, PolicyEgress: true})
			n1, n2 := c.Nodes[0], c.Nodes[1]
			pod, server := n1.Pods[0], n2.Pods[0]
			conns := serveHTTP(t, server, 8080)
			rec := &recorder{}
			px := startProxy(t, c, n1, rec)
			err := px.SetPolicy(proxy.Policy{Revision: 1, Endpoints: []proxy.Endpoint{{ID: pod.ID, Identity: pod.Identity, IPv4: pod.IP,
				Ports: []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 8080,
					Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{server.Identity}, L7: submitRules}}}}}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := n1.DP.Maps().SetPolicy(pod.ID, []spec.PolicyEntry{
				{Direction: spec.Egress, Identity: server.Identity, Protocol: spec.ProtoTCP, Port: 8080, ProxyPort: httpProxyPort},
			}); err != nil {
				t.Fatal(err)
			}
			checkRequests(t, pod, server, submitCases)
			if n := conns.Load(); n != 1 {
				t.Fatalf("the server saw %d connections, want the kept-alive one", n)
			}
			records, _ := rec.snapshot()
			var denied int
			for _, r := range records {
				if r.Type == accesslog.Request && r.Verdict == accesslog.Denied {
					denied++
				}
			}
			if len(records) != 12 || denied != 3 {
				t.Fatalf("%d records with %d denied requests, want 12 and 3: %+v", len(records), denied, records)
			}
		})
	}
}

// A server's ingress rules send its clients' requests, from its node and
// from another, to the HTTP proxy of ingress rules on its node: judged by
// the server's rules, allowed ones reach it from the client's address,
// each recorded as the server's ingress. A client whose own egress rules
// send the connection to the egress proxy is judged there by both.
func TestPrivilegedHTTPIngressProxy(t *testing.T) {
	for _, mode := range []spec.RoutingMode{spec.Native, spec.Tunnel} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newCluster(t, dptest.Options{Mode: mode, PolicyIngress: true, PolicyEgress: true})
			n1, n2 := c.Nodes[0], c.Nodes[1]
			server, local, remote := n1.Pods[0], n1.Pods[1], n2.Pods[0]
			serveHTTP(t, server, 8080)
			rec := &recorder{}
			px := startProxy(t, c, n1, rec)
			clients := []identity.NumericIdentity{local.Identity, remote.Identity}
			srv := proxy.Endpoint{ID: server.ID, Identity: server.Identity, IPv4: server.IP,
				Ports: []policy.L7Port{{Direction: spec.Ingress, Protocol: spec.ProtoTCP, Port: 8080,
					Allows: []policy.L7Allow{{Identities: clients, L7: submitRules}}}}}
			must(t, px.SetPolicy(proxy.Policy{Revision: 1, Endpoints: []proxy.Endpoint{srv}}))
			var ingress []spec.PolicyEntry
			for _, id := range clients {
				ingress = append(ingress, spec.PolicyEntry{Direction: spec.Ingress, Identity: id, Protocol: spec.ProtoTCP, Port: 8080, ProxyPort: httpIngressProxyPort})
			}
			must(t, n1.DP.Maps().SetPolicy(server.ID, ingress))
			for _, cl := range []*dptest.Pod{local, remote} {
				must(t, cl.Node.DP.Maps().SetPolicy(cl.ID, []spec.PolicyEntry{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 8080}}))
				checkRequests(t, cl, server, submitCases)
			}
			records, _ := rec.snapshot()
			if len(records) != 24 {
				t.Fatalf("%d records, want 24", len(records))
			}
			for _, r := range records {
				if r.Direction != spec.Ingress || r.Type == accesslog.Request && (r.DstEndpoint != server.ID || r.Dst.Addr() != server.IP) {
					t.Fatalf("record %+v, want the server's ingress", r)
				}
			}

			// local's own egress rules (allowing every request) now send
			// its connections to the egress proxy, which judges them by
			// the server's ingress rules too: the datapath lets its
			// connection through the server's redirecting allow.
			all := &policy.L7Rules{Parser: policy.ParserHTTP}
			must(t, px.SetPolicy(proxy.Policy{Revision: 2, Endpoints: []proxy.Endpoint{srv, {ID: local.ID, Identity: local.Identity, IPv4: local.IP,
				Ports: []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 8080,
					Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{server.Identity}, L7: all}}}}}}}))
			must(t, n1.DP.Maps().SetPolicy(local.ID, []spec.PolicyEntry{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 8080, ProxyPort: httpProxyPort}}))
			checkRequests(t, local, server, submitCases)
			records, _ = rec.snapshot()
			for _, r := range records[24:] {
				if r.Direction != spec.Egress {
					t.Fatalf("record %+v, want the egress proxy's", r)
				}
			}
		})
	}
}
