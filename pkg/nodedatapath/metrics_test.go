package nodedatapath

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
	if err := registerMetrics(reg, bpf); err != nil {
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
