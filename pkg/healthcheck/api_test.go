package healthcheck

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/cilium/hive/hivetest"

	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/healthcheck/client"
	"github.com/cilium-go/cilium/pkg/healthcheck/probe"
	"github.com/cilium-go/cilium/pkg/node"
)

// noNet is a network where nothing answers.
type noNet struct{}

func (noNet) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("network unreachable")
}
func (noNet) ListenICMP() (net.PacketConn, error) { return nil, errors.New("network unreachable") }

// The API's paths and JSON are Cilium's: the client (Cilium's models)
// reads GET /status before and after PUT /status/probe, and GET /healthz.
func TestAPI(t *testing.T) {
	nodes := func() []node.Node {
		return []node.Node{{Name: "a", Self: true, IPv4: netip.MustParseAddr("192.0.2.1")}}
	}
	c := NewChecker(probe.New(noNet{}, 0), "a", DefaultInterval, true, nodes)
	reg := health.NewRegistry()
	reg.Scope("agent.datapath").Degraded("maps missing", errors.New("no bpffs"))
	sock := filepath.Join(t.TempDir(), "health.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewAPI(c, reg, hivetest.Logger(t)).Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	cl, ctx := client.New(sock), context.Background()

	sr, err := cl.Status(ctx)
	if err != nil || sr.Local.Name != "a" || len(sr.Nodes) != 1 || sr.Nodes[0].Host.PrimaryAddress.Icmp != nil ||
		sr.ProbeInterval != "1m0s" {
		t.Fatalf("status before a probe: %+v %v", sr, err)
	}
	sr, err = cl.Probe(ctx)
	if err != nil || len(sr.Nodes) != 1 || sr.Timestamp == "" {
		t.Fatalf("probe: %+v %v", sr, err)
	}
	if p := sr.Nodes[0].Host.PrimaryAddress; p.IP != "192.0.2.1" || p.Icmp.Status == "" || p.HTTP.Status == "" {
		t.Fatalf("an unreachable node: %+v %+v", p.Icmp, p.HTTP)
	}
	if again, err := cl.Status(ctx); err != nil || again.Timestamp != sr.Timestamp {
		t.Fatalf("status after the probe: %+v %v", again, err)
	}
	hr, err := cl.Healthz(ctx)
	if err != nil || hr.Uptime == "" || hr.Cilium.Cilium == nil || hr.Cilium.Cilium.State != "Warning" ||
		hr.Cilium.Cilium.Msg != "agent.datapath: maps missing" {
		t.Fatalf("healthz: %+v %v", hr, err)
	}
	// Writes elsewhere are refused.
	req, _ := http.NewRequest(http.MethodPost, "http://localhost/v1beta/status", nil)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /status: %v %v", resp, err)
	}
	resp.Body.Close()
}
