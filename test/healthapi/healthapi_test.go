// Package healthapi proves cilium-go's health API with Cilium's own
// generated client (api/v1/health/client, go-openapi): a module of its
// own, so that the product links none of it.
package healthapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"

	healthclient "github.com/cilium/cilium/api/v1/health/client"
	"github.com/cilium/cilium/api/v1/health/client/connectivity"
	"github.com/cilium/cilium/api/v1/health/client/restapi"
	"github.com/cilium/hive/hivetest"
	runtime_client "github.com/go-openapi/runtime/client"
	"github.com/go-openapi/strfmt"

	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/healthcheck"
	"github.com/cilium-go/cilium/pkg/healthcheck/probe"
	"github.com/cilium-go/cilium/pkg/node"
)

type noNet struct{}

func (noNet) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("network unreachable")
}
func (noNet) ListenICMP() (net.PacketConn, error) { return nil, errors.New("network unreachable") }

// Cilium's client, as cilium-health builds it for a unix socket, reads
// every operation of the API and validates the answers against Cilium's
// schema.
func TestCiliumsClient(t *testing.T) {
	nodes := func() []node.Node {
		return []node.Node{{Name: "a", Self: true, IPv4: netip.MustParseAddr("192.0.2.1"),
			PodCIDR: netip.MustParsePrefix("10.1.0.0/24"), HealthIPv4: netip.MustParseAddr("10.1.0.7")}}
	}
	c := healthcheck.NewChecker(probe.New(noNet{}, 0), "a", healthcheck.DefaultInterval, true, nodes)
	sock := filepath.Join(t.TempDir(), "health.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: healthcheck.NewAPI(c, health.NewRegistry(), hivetest.Logger(t)).Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	rt := runtime_client.NewWithClient("localhost", healthclient.DefaultBasePath, healthclient.DefaultSchemes, &http.Client{Transport: tr})
	api := healthclient.New(rt, strfmt.Default)

	st, err := api.Connectivity.GetStatus(connectivity.NewGetStatusParams())
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	if err := st.Payload.Validate(strfmt.Default); err != nil || st.Payload.Local.Name != "a" {
		t.Fatalf("GET /status: %+v %v", st.Payload, err)
	}
	pr, err := api.Connectivity.PutStatusProbe(connectivity.NewPutStatusProbeParams())
	if err != nil {
		t.Fatalf("PUT /status/probe: %v", err)
	}
	if err := pr.Payload.Validate(strfmt.Default); err != nil || len(pr.Payload.Nodes) != 1 {
		t.Fatalf("PUT /status/probe: %+v %v", pr.Payload, err)
	}
	n := pr.Payload.Nodes[0]
	if n.Host.PrimaryAddress.IP != "192.0.2.1" || n.Host.PrimaryAddress.HTTP.Status == "" ||
		n.HealthEndpoint.PrimaryAddress.IP != "10.1.0.7" || n.HealthEndpoint.PrimaryAddress.Icmp.Status == "" {
		t.Fatalf("node %+v: want both paths probed and unreachable", n)
	}
	hz, err := api.Restapi.GetHealthz(restapi.NewGetHealthzParams())
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	if err := hz.Payload.Validate(strfmt.Default); err != nil || hz.Payload.Cilium.Cilium.State != "Ok" {
		t.Fatalf("GET /healthz: %+v %v", hz.Payload, err)
	}
}
