package nodedatapath

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cilium-go/cilium/pkg/api/server"
)

// mapPressure exports how full each BPF map is, as Cilium's
// cilium_bpf_map_pressure does: entries over max_entries, read when
// scraped. A map at 1 rejects new entries (the policy map, the ipcache)
// or evicts its least recently used ones (conntrack, NAT).
type mapPressure struct {
	maps server.MapLister
	desc *prometheus.Desc
}

func registerMetrics(reg *prometheus.Registry, maps server.MapLister) error {
	return reg.Register(&mapPressure{maps: maps, desc: prometheus.NewDesc("cilium_bpf_map_pressure",
		"Fill of a BPF map: its entries over its maximum", []string{"map_name"}, nil)})
}

// Describe implements prometheus.Collector.
func (p *mapPressure) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect implements prometheus.Collector. Maps without keys (the events
// ring buffer) are left out.
func (p *mapPressure) Collect(ch chan<- prometheus.Metric) {
	maps, err := p.maps.ListMaps()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(p.desc, err)
		return
	}
	for _, m := range maps {
		if m.Entries < 0 || m.MaxEntries == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue,
			float64(m.Entries)/float64(m.MaxEntries), m.Name)
	}
}
