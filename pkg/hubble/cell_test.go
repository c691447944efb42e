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
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/monitor"
	"github.com/cilium-go/cilium/pkg/policy"
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

func startHubble(t *testing.T, configure func(*Config)) *monitor.Hub {
	t.Helper()
	hub := monitor.NewHub()
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, Cell,
		cell.Provide(
			func() *monitor.Hub { return hub },
			func(db *statedb.DB) (statedb.Table[*endpoint.EndpointRow], error) { return endpoint.NewTable(db) },
			policy.NewCookies,
			func() k8sagent.Config { return k8sagent.Config{K8sNodeName: "node-1"} },
		))
	hive.AddConfigOverride(h, configure)
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
	})
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
	sock := filepath.Join(t.TempDir(), "hubble.sock")
	tcpAddr := freeAddr(t)
	startHubble(t, func(c *Config) { c.HubbleSocketPath, c.HubbleListenAddress, c.HubbleDisableTLS = sock, tcpAddr, true })
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s: %v, want none", sock, err)
	}
	if c, err := net.Dial("tcp", tcpAddr); err == nil {
		c.Close()
		t.Errorf("%s answers", tcpAddr)
	}
}
