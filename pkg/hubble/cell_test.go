package hubble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/monitor"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
	proxyagent "github.com/cilium-go/cilium/pkg/proxy/agent"
)

func TestConfigNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 4096}, "--hubble-event-buffer-capacity"},
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 0}, "--hubble-event-buffer-capacity"},
		{Config{EnableHubble: true, HubbleSocketPath: "h.sock", HubbleEventBufferCapacity: 4095}, "--hubble-socket-path"},
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 4095, HubbleMetrics: "flow kafka",
			HubbleMetricsServer: ":9965"}, `--hubble-metrics: metric "kafka"`},
		{Config{EnableHubble: true, HubbleSocketPath: "/run/h.sock", HubbleEventBufferCapacity: 4095, HubbleMetrics: "flow"},
			"--hubble-metrics-server"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.c, err, tc.want)
		}
	}
	if err := (Config{HubbleEventBufferCapacity: 3}).Validate(); err != nil {
		t.Errorf("flags of a disabled Hubble are not checked: %v", err)
	}
	if err := DefaultConfig.Validate(); err != nil {
		t.Error(err)
	}
	on := DefaultConfig
	on.EnableHubble = true
	if err := on.Validate(); err != nil {
		t.Error(err)
	}
}

// freeAddr is a loopback address with a port no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startHubble starts the module with its config as configure says, the
// layer-7 proxy's directory in proxyDir, and the extra cells.
func startHubble(t *testing.T, configure func(*Config), proxyDir string, extra ...cell.Cell) *monitor.Hub {
	t.Helper()
	return startRedactingHubble(t, configure, nil, proxyDir, extra...)
}

// startRedactingHubble is startHubble with the --hubble-redact-* flags
// as redact says (nil: their defaults).
func startRedactingHubble(t *testing.T, configure func(*Config), redact func(*RedactConfig), proxyDir string, extra ...cell.Cell) *monitor.Hub {
	t.Helper()
	hub := monitor.NewHub()
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, Cell, cell.Group(extra...),
		cell.Config(paths.DefaultConfig),
		cell.Config(proxyagent.Config{EnableL7Proxy: true, ProxyDir: proxyDir}),
		cell.Provide(
			func() *monitor.Hub { return hub },
			func(db *statedb.DB) (statedb.Table[*endpoint.EndpointRow], error) { return endpoint.NewTable(db) },
			policy.NewCookies,
			func() k8sagent.Config { return k8sagent.Config{K8sNodeName: "node-1"} },
		))
	hive.AddConfigOverride(h, configure)
	if redact != nil {
		hive.AddConfigOverride(h, redact)
	}
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })
	return hub
}

// TestCellServesFlows: the module's parts together make flows of the
// monitor's events and serve them on the socket, on the TCP listener and
// as metrics.
func TestCellServesFlows(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hubble.sock")
	tcpAddr, metricsAddr := freeAddr(t), freeAddr(t)
	hub := startHubble(t, func(c *Config) {
		c.EnableHubble, c.HubbleSocketPath, c.HubbleListenAddress, c.HubbleDisableTLS = true, sock, tcpAddr, true
		c.HubbleMetrics, c.HubbleMetricsServer = "drop", metricsAddr
	}, t.TempDir())
	hub.Publish(spec.Event{Type: spec.EventDrop, Reason: spec.DropPolicy, Direction: spec.Ingress,
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.2"), SrcPort: 40000, DstPort: 80,
		Protocol: spec.ProtoTCP, TCPFlags: 0x02, SrcIdentity: 2, DstIdentity: 1})

	for _, target := range []string{"unix://" + sock, tcpAddr} {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		client := observer.NewObserverClient(conn)
		testenv.Eventually(t, 10*time.Second, func() error {
			st, err := client.ServerStatus(context.Background(), &observer.ServerStatusRequest{})
			if err != nil {
				return err
			}
			if st.GetNumFlows() != 1 {
				return fmt.Errorf("%s: %d flows, want 1", target, st.GetNumFlows())
			}
			return nil
		})
		stream, err := client.GetFlows(context.Background(), &observer.GetFlowsRequest{Number: 1})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if f := resp.GetFlow(); f.GetVerdict() != flow.Verdict_DROPPED || f.GetNodeName() != "node-1" ||
			f.GetDestination().GetIdentity() != 1 || resp.GetNodeName() != "node-1" {
			t.Errorf("%s: flow %v, want node-1's drop to the host", target, f)
		}
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "hubble_drop_total") {
		t.Errorf("metrics without hubble_drop_total:\n%s", body)
	}
}

// TestCellOffServesNothing: without --enable-hubble no part is built,
// whatever the other flags say.
func TestCellOffServesNothing(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "hubble.sock")
	tcpAddr := freeAddr(t)
	startHubble(t, func(c *Config) { c.HubbleSocketPath, c.HubbleListenAddress, c.HubbleDisableTLS = sock, tcpAddr, true }, dir)
	for _, path := range []string{sock, accesslog.SocketFile(dir)} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s: %v, want none", path, err)
		}
	}
	if c, err := net.Dial("tcp", tcpAddr); err == nil {
		c.Close()
		t.Errorf("%s answers", tcpAddr)
	}
}

// TestCellShowsTheProxysRecords: the layer-7 proxy's records, sent to
// the access log's socket in the proxy's directory, are L7 flows of the
// node's ring (hubble observe --type l7) and count in the L7 metrics;
// with --hubble-redact-enabled an HTTP flow has its URL's query and
// the denied header's value left out, its DNS flows nothing.
func TestCellShowsTheProxysRecords(t *testing.T) {
	dir := t.TempDir()
	sock, metricsAddr := filepath.Join(dir, "hubble.sock"), freeAddr(t)
	startRedactingHubble(t, func(c *Config) {
		c.EnableHubble, c.HubbleSocketPath = true, sock
		c.HubbleMetrics, c.HubbleMetricsServer = "dns:query", metricsAddr
	}, func(c *RedactConfig) {
		c.HubbleRedactEnabled, c.HubbleRedactHTTPURLQuery, c.HubbleRedactHTTPHeadersDeny = true, true, []string{"authorization"}
	}, filepath.Join(dir, "proxy"))
	sender := accesslog.NewSender(accesslog.SocketFile(filepath.Join(dir, "proxy")), 0, hivetest.Logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sender.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(t, 10*time.Second, func() error {
		if !sender.Connected() {
			return errors.New("the proxy's sender is not connected")
		}
		return nil
	})
	sender.Record(accesslog.Record{Time: time.Now(), Type: accesslog.Request, Verdict: accesslog.Denied, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.0.1.5:40000"), Dst: netip.MustParseAddrPort("10.96.0.10:53"), Protocol: spec.ProtoUDP,
		SrcIdentity: 1000, DstIdentity: 2, DNS: &accesslog.DNSRecord{Query: "evil.example.org.", QTypes: []string{"A"}}})
	sender.Record(accesslog.Record{Time: time.Now(), Type: accesslog.Request, Verdict: accesslog.Forwarded, Direction: spec.Egress,
		Src: netip.MustParseAddrPort("10.0.1.5:40001"), Dst: netip.MustParseAddrPort("10.0.2.7:80"), Protocol: spec.ProtoTCP,
		SrcIdentity: 1000, DstIdentity: 1001, HTTP: &accesslog.HTTPRecord{Method: "GET", URL: "http://web/login?token=abc",
			Protocol: "HTTP/1.1", Headers: http.Header{"Authorization": {"Bearer abc"}, "Accept": {"*/*"}}}})

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := observer.NewObserverClient(conn)
	l7Flow := func(protocol string) *flow.Flow {
		t.Helper()
		var f *flow.Flow
		testenv.Eventually(t, 10*time.Second, func() error {
			stream, err := client.GetFlows(context.Background(), &observer.GetFlowsRequest{Number: 10,
				Whitelist: []*flow.FlowFilter{{EventType: []*flow.EventTypeFilter{{Type: 129}}, Protocol: []string{protocol}}}})
			if err != nil {
				return err
			}
			resp, err := stream.Recv()
			if err != nil {
				return fmt.Errorf("no L7 %s flow: %w", protocol, err)
			}
			f = resp.GetFlow()
			return nil
		})
		return f
	}
	f := l7Flow("dns")
	if f.GetType() != flow.FlowType_L7 || f.GetVerdict() != flow.Verdict_DROPPED || f.GetL7().GetDns().GetQuery() != "evil.example.org." ||
		f.GetNodeName() != "node-1" || f.GetDestination().GetIdentity() != 2 {
		t.Errorf("flow %v, want node-1's denied DNS query", f)
	}
	f = l7Flow("http")
	h := f.GetL7().GetHttp()
	var headers []string
	for _, x := range h.GetHeaders() {
		headers = append(headers, x.GetKey()+": "+x.GetValue())
	}
	if h.GetUrl() != "http://web/login" || f.GetSummary() != "HTTP/1.1 GET http://web/login" ||
		!slices.Equal(headers, []string{"Accept: */*", "Authorization: HUBBLE_REDACTED"}) {
		t.Errorf("HTTP flow: url %q, summary %q, headers %q; want the query and Authorization's value redacted", h.GetUrl(), f.GetSummary(), headers)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := `hubble_dns_queries_total{ips_returned="0",qtypes="A",query="evil.example.org.",rcode="Policy denied"} 1`; !strings.Contains(string(body), want) {
		t.Errorf("metrics without %s:\n%s", want, body)
	}
}

// learnedNames are the names endpoints learned, as the agent's FQDN cache
// answers them.
type learnedNames map[uint16]map[netip.Addr][]string

func (n learnedNames) NamesOf(ep uint16, a netip.Addr) []string { return n[ep][a] }

// TestCellNamesFlowsByLearnedNames: given the names endpoints learned
// (the agent provides its FQDN cache), a local endpoint's flow names the
// other side by them, and hubble observe --to-fqdn finds it.
func TestCellNamesFlowsByLearnedNames(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hubble.sock")
	server := netip.MustParseAddr("192.0.2.10")
	hub := startHubble(t, func(c *Config) { c.EnableHubble, c.HubbleSocketPath = true, sock }, t.TempDir(),
		cell.Provide(func() parser.Names { return learnedNames{7: {server: {"world.example."}}} }),
		cell.Invoke(func(db *statedb.DB, eps statedb.Table[*endpoint.EndpointRow]) error {
			rw := eps.(statedb.RWTable[*endpoint.EndpointRow]) // the table startHubble made
			txn := db.WriteTxn(rw)
			_, _, err := rw.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: 7, Identity: 1000,
				IPv4: netip.MustParseAddr("10.0.1.5")}})
			txn.Commit()
			return err
		}))
	hub.Publish(spec.Event{Type: spec.EventTrace, Point: spec.TraceToStack, Direction: spec.Egress, CT: spec.CTNew,
		Src: netip.MustParseAddr("10.0.1.5"), Dst: server, SrcPort: 40000, DstPort: 443, Protocol: spec.ProtoTCP,
		TCPFlags: 0x02, SrcIdentity: 1000, DstIdentity: 2, SrcEndpoint: 7})

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := observer.NewObserverClient(conn)
	testenv.Eventually(t, 10*time.Second, func() error {
		stream, err := client.GetFlows(context.Background(), &observer.GetFlowsRequest{Number: 10,
			Whitelist: []*flow.FlowFilter{{DestinationFqdn: []string{"*.example"}}}})
		if err != nil {
			return err
		}
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("no flow to *.example: %w", err)
		}
		if names := resp.GetFlow().GetDestinationNames(); len(names) != 1 || names[0] != "world.example" {
			return fmt.Errorf("destination names %q, want world.example", names)
		}
		return nil
	})
}
