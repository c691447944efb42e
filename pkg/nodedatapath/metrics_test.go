package nodedatapath

import (
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
)

type fakeMaps []models.BPFMap

func (f fakeMaps) ListMaps() ([]models.BPFMap, error) { return f, nil }

func TestMapPressure(t *testing.T) {
	reg := prometheus.NewRegistry()
	bpf := fakeMaps{
		{Name: "cilium_ct4", MaxEntries: 65536, Entries: 65536},
		{Name: "cilium_policy", MaxEntries: 1000, Entries: 250},
		{Name: "cilium_events", MaxEntries: 262144, Entries: -1},
	}
	if err := reg.Register(newMapPressure(bpf)); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"cilium_bpf_map_pressure/cilium_ct4": 1, "cilium_bpf_map_pressure/cilium_policy": 0.25}
	if !maps.Equal(got, want) {
		t.Fatalf("gathered %v, want %v", got, want)
	}
}

// TestPacketCounters: the metrics map's counters come out under Cilium's
// names, with its reason texts and upper-case directions, which
// cilium-cli's connectivity test and Cilium's dashboards select on.
func TestPacketCounters(t *testing.T) {
	counters := []datapath.Counter{
		{Reason: spec.Forwarded, Direction: spec.Egress, Packets: 7, Bytes: 700},
		{Reason: spec.Forwarded, Direction: spec.Ingress, Packets: 5, Bytes: 500},
		{Reason: spec.DropPolicy, Direction: spec.Ingress, Packets: 2, Bytes: 120},
		{Reason: spec.DropPolicyDeny, Direction: spec.Egress, Packets: 1, Bytes: 60},
		{Reason: spec.DropNoService, Direction: 0, Packets: 3, Bytes: 180},
	}
	c := newPacketCounters(func() ([]datapath.Counter, error) { return counters, nil })
	want := `
# HELP cilium_drop_bytes_total Bytes the datapath dropped, by reason and direction
# TYPE cilium_drop_bytes_total counter
cilium_drop_bytes_total{direction="EGRESS",reason="Policy denied by denylist"} 60
cilium_drop_bytes_total{direction="INGRESS",reason="Policy denied"} 120
cilium_drop_bytes_total{direction="UNKNOWN",reason="Service backend not found"} 180
# HELP cilium_drop_count_total Packets the datapath dropped, by reason and direction
# TYPE cilium_drop_count_total counter
cilium_drop_count_total{direction="EGRESS",reason="Policy denied by denylist"} 1
cilium_drop_count_total{direction="INGRESS",reason="Policy denied"} 2
cilium_drop_count_total{direction="UNKNOWN",reason="Service backend not found"} 3
# HELP cilium_forward_bytes_total Bytes the datapath forwarded, by direction
# TYPE cilium_forward_bytes_total counter
cilium_forward_bytes_total{direction="EGRESS"} 700
cilium_forward_bytes_total{direction="INGRESS"} 500
# HELP cilium_forward_count_total Packets the datapath forwarded, by direction
# TYPE cilium_forward_count_total counter
cilium_forward_count_total{direction="EGRESS"} 7
cilium_forward_count_total{direction="INGRESS"} 5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// Before the datapath starts, nothing is counted and nothing fails.
	empty := newPacketCounters(func() ([]datapath.Counter, error) { return nil, nil })
	if n := testutil.CollectAndCount(empty); n != 0 {
		t.Fatalf("%d samples before the datapath started", n)
	}
}
