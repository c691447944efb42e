package main

import (
	"strings"
	"testing"
	"text/tabwriter"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
)

func path(ip, status string, latency int64) *healthmodels.PathStatus {
	cs := func() *healthmodels.ConnectivityStatus {
		return &healthmodels.ConnectivityStatus{Status: status, Latency: latency, LastProbed: "2026-12-03T18:00:00Z"}
	}
	return &healthmodels.PathStatus{IP: ip, Icmp: cs(), HTTP: cs()}
}

// The table of Cilium's cilium-health status: this node first, a node
// with an unreachable path counts as unreachable, unknown paths are said.
func TestFormatStatus(t *testing.T) {
	sr := &healthmodels.HealthStatusResponse{
		Local: &healthmodels.SelfStatus{Name: "b"}, Timestamp: "2026-12-03T18:00:00Z", ProbeInterval: "1m0s",
		Nodes: []*healthmodels.NodeStatus{
			{Name: "a", Host: &healthmodels.HostStatus{PrimaryAddress: path("192.0.2.1", "no reply", 0)},
				HealthEndpoint: &healthmodels.EndpointStatus{PrimaryAddress: path("10.1.0.1", "", 1000)}},
			{Name: "b", Host: &healthmodels.HostStatus{PrimaryAddress: path("192.0.2.2", "", 2000)},
				HealthEndpoint: &healthmodels.EndpointStatus{PrimaryAddress: &healthmodels.PathStatus{IP: "10.2.0.1"}}},
		},
	}
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 2, 0, 3, ' ', 0)
	formatStatus(w, sr, false)
	w.Flush()
	want := []string{
		"Cluster health:   1/2 reachable   (2026-12-03T18:00:00Z)   (Probe interval: 1m0s)",
		"Name              IP              Node                     Endpoints",
		"  b (localhost)   192.0.2.2       1/1                      0/1 (1 unknown)",
		"  a               192.0.2.1       0/1                      1/1",
	}
	if got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	out.Reset()
	w = tabwriter.NewWriter(&out, 2, 0, 3, ' ', 0)
	formatStatus(w, sr, true)
	w.Flush()
	for _, s := range []string{"  a:\n", "Host connectivity to 192.0.2.1:", "ICMP to stack:", "no reply",
		"Endpoint connectivity to 10.1.0.1:", "OK, RTT=1µs", "(Last probed: 2026-12-03T18:00:00Z)"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("verbose output lacks %q:\n%s", s, out.String())
		}
	}
}
