package loadbalancer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
)

func TestLocalReady(t *testing.T) {
	web := PortKey{Name: "http", Protocol: spec.ProtoTCP}
	svc := Service{Ports: []Port{{Name: "http", Protocol: spec.ProtoTCP, Port: 80}}}
	ep := func(addr, node string, ready bool, ports map[PortKey]uint16) Endpoint {
		return Endpoint{Address: netip.MustParseAddr(addr), NodeName: node, Ready: ready, Serving: ready, Ports: ports}
	}
	both := map[PortKey]uint16{web: 8080, {Name: "metrics", Protocol: spec.ProtoTCP}: 9090}
	eps := []Endpoint{
		ep("10.244.1.5", "node-a", true, both),
		ep("10.244.1.5", "node-a", true, both), // the same address in another slice
		ep("10.244.1.6", "node-a", true, map[PortKey]uint16{web: 8080}),
		ep("10.244.1.7", "node-a", false, map[PortKey]uint16{web: 8080}),
		ep("10.244.1.8", "node-a", true, map[PortKey]uint16{{Name: "other", Protocol: spec.ProtoTCP}: 1}),
		ep("10.244.2.5", "node-b", true, map[PortKey]uint16{web: 8080}),
	}
	if n := LocalReady(svc, eps, "node-a"); n != 2 {
		t.Errorf("node-a: %d local ready endpoints, want 2", n)
	}
	if n := LocalReady(svc, eps, "node-c"); n != 0 {
		t.Errorf("node-c: %d local ready endpoints, want 0", n)
	}
}

// hcNet is where the health checks listen and how the test reaches them.
type hcNet struct {
	addrs  []netip.Addr
	listen ListenFunc
	dial   func(context.Context, netip.AddrPort) (net.Conn, error)
}

// TestHealthChecks serves healthCheckNodePorts on a network in memory.
func TestHealthChecks(t *testing.T) {
	n := lbtest.NewNet()
	testHealthChecks(t, hcNet{addrs: []netip.Addr{netip.MustParseAddr("192.168.77.1"), netip.MustParseAddr("192.168.77.2")},
		listen: n.Listen, dial: n.Dial})
}

// TestPrivilegedHealthChecks serves them with real sockets, on the
// loopback addresses of a network namespace of the test's own.
func TestPrivilegedHealthChecks(t *testing.T) {
	ns := testenv.NewNetNS(t)
	testHealthChecks(t, hcNet{addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")},
		listen: func(a netip.AddrPort) (l net.Listener, err error) {
			err = netnamespace.Do(ns, func() error { l, err = listenTCP(a); return err })
			return l, err
		},
		dial: func(ctx context.Context, a netip.AddrPort) (c net.Conn, err error) {
			err = netnamespace.Do(ns, func() error {
				c, err = (&net.Dialer{}).DialContext(ctx, "tcp4", a.String())
				return err
			})
			return c, err
		}})
}

func testHealthChecks(t *testing.T, hn hcNet) {
	db := statedb.New()
	tables, err := NewTables(db)
	if err != nil {
		t.Fatal(err)
	}
	reg := health.NewRegistry()
	hc := newHealthChecks(db, tables.Services, hn.addrs, hivetest.Logger(t))
	hc.listen, hc.retry = hn.listen, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hc.run(ctx, reg.Scope("healthchecks"))
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)

	put := func(rows ...*ServiceRow) {
		txn := db.WriteTxn(tables.Services)
		for _, r := range rows {
			if _, _, err := tables.Services.Insert(txn, r); err != nil {
				t.Fatal(err)
			}
		}
		txn.Commit()
	}
	del := func(name string) {
		txn := db.WriteTxn(tables.Services)
		if _, _, err := tables.Services.Delete(txn, &ServiceRow{Service: Service{Name: ServiceName{"default", name}}}); err != nil {
			t.Fatal(err)
		}
		txn.Commit()
	}
	lb := func(name string, port uint16, ready int, tweaks ...func(*Service)) *ServiceRow {
		s := Service{Name: ServiceName{"default", name}, Type: TypeLoadBalancer, ExternalLocal: true, HealthCheckNodePort: port}
		for _, tw := range tweaks {
			tw(&s)
		}
		return &ServiceRow{Service: s, LocalReady: ready}
	}
	client := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return hn.dial(ctx, netip.MustParseAddrPort(addr))
		}}}
	// answer is "status weight localEndpoints", or an error.
	answer := func(a netip.Addr, port uint16) (string, error) {
		resp, err := client.Get("http://" + netip.AddrPortFrom(a, port).String() + "/healthz")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		h := resp.Header
		if h.Get("Content-Type") != "application/json" || h.Get("X-Content-Type-Options") != "nosniff" {
			return "", fmt.Errorf("headers %v", h)
		}
		var count int
		if _, err := fmt.Sscanf(string(b[strings.Index(string(b), `"localEndpoints"`):]), `"localEndpoints": %d`, &count); err != nil {
			return "", fmt.Errorf("body %q: %w", b, err)
		}
		return fmt.Sprintf("%d %s %d", resp.StatusCode, h.Get("X-Load-Balancing-Endpoint-Weight"), count), nil
	}
	// expect waits until every node address answers want at port ("" for
	// no answer).
	expect := func(port uint16, want string) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, func() error {
			for _, a := range hn.addrs {
				got, err := answer(a, port)
				if want == "" {
					if err == nil {
						return fmt.Errorf("%s:%d answers %q", a, port, got)
					}
					continue
				}
				if err != nil {
					return err
				}
				if got != want {
					return fmt.Errorf("%s:%d: %q, want %q", a, port, got, want)
				}
			}
			return nil
		})
	}
	degraded := func(want string) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, func() error {
			var got []string
			for _, s := range reg.Degraded() {
				got = append(got, s.Message+": "+s.Error)
			}
			if all := strings.Join(got, "; "); (want == "") != (all == "") || !strings.Contains(all, want) {
				return fmt.Errorf("degraded: %q, want %q", all, want)
			}
			return nil
		})
	}

	// Another process has 31002 at the first address.
	busy, err := hn.listen(netip.AddrPortFrom(hn.addrs[0], 31002))
	if err != nil {
		t.Fatal(err)
	}
	put(lb("a", 31001, 2), lb("b", 31002, 1), lb("d", 31004, 0),
		lb("np", 31003, 1, func(s *Service) { s.Type = TypeNodePort }),
		lb("cluster", 31005, 1, func(s *Service) { s.ExternalLocal = false }),
		lb("headless", 31006, 1, func(s *Service) { s.Headless = true }))
	expect(31001, "200 2 2")
	expect(31004, "503 0 0")
	for _, p := range []uint16{31003, 31005, 31006} {
		expect(p, "")
	}
	// 31002 is reported, the others are served, and nothing at 31002
	// answers for b: its other address has no server either.
	degraded("healthCheckNodePort 31002 of default/b")
	if _, err := answer(hn.addrs[1], 31002); err == nil {
		t.Error("b answers at its second address while the first is taken")
	}

	// Counts follow the table.
	put(lb("a", 31001, 0), lb("d", 31004, 3))
	expect(31001, "503 0 0")
	expect(31004, "200 3 3")

	// The port is freed: b is served, the health is back.
	busy.Close()
	expect(31002, "200 1 1")
	degraded("")

	// Services go, or move to another port.
	del("a")
	put(lb("d", 31007, 3))
	expect(31001, "")
	expect(31004, "")
	expect(31007, "200 3 3")

	// Everything closes when the job ends.
	stop()
	for _, p := range []uint16{31002, 31007} {
		expect(p, "")
	}
}
