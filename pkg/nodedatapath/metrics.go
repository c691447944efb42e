package nodedatapath

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
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

func registerMetrics(reg *prometheus.Registry, maps server.MapLister, n *datapath.Node) error {
	if err := reg.Register(newMapPressure(maps)); err != nil {
		return err
	}
	return reg.Register(newPacketCounters(func() ([]datapath.Counter, error) {
		maps := n.Maps()
		if maps == nil { // not started yet: nothing counted
			return nil, nil
		}
		return maps.Counters()
	}))
}

func newMapPressure(maps server.MapLister) *mapPressure {
	return &mapPressure{maps: maps, desc: prometheus.NewDesc("cilium_bpf_map_pressure",
		"Fill of a BPF map: its entries over its maximum", []string{"map_name"}, nil)}
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

// packetCounters exports the datapath's metrics map under Cilium's names:
// cilium_forward_{count,bytes}_total by direction and
// cilium_drop_{count,bytes}_total by reason and direction, with Cilium's
// reason texts and upper-case directions. They are read when scraped: the
// map's per-CPU counters only grow, so the values are counters.
type packetCounters struct {
	counters                   func() ([]datapath.Counter, error)
	forwardCount, forwardBytes *prometheus.Desc
	dropCount, dropBytes       *prometheus.Desc
}

func newPacketCounters(counters func() ([]datapath.Counter, error)) *packetCounters {
	dir := []string{"direction"}
	reasonDir := []string{"reason", "direction"}
	return &packetCounters{
		counters:     counters,
		forwardCount: prometheus.NewDesc("cilium_forward_count_total", "Packets the datapath forwarded, by direction", dir, nil),
		forwardBytes: prometheus.NewDesc("cilium_forward_bytes_total", "Bytes the datapath forwarded, by direction", dir, nil),
		dropCount:    prometheus.NewDesc("cilium_drop_count_total", "Packets the datapath dropped, by reason and direction", reasonDir, nil),
		dropBytes:    prometheus.NewDesc("cilium_drop_bytes_total", "Bytes the datapath dropped, by reason and direction", reasonDir, nil),
	}
}

// Describe implements prometheus.Collector.
func (p *packetCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.forwardCount
	ch <- p.forwardBytes
	ch <- p.dropCount
	ch <- p.dropBytes
}

// Collect implements prometheus.Collector.
func (p *packetCounters) Collect(ch chan<- prometheus.Metric) {
	counters, err := p.counters()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(p.dropCount, err)
		return
	}
	for _, c := range counters {
		dir := directionLabel(c)
		if c.Reason == spec.Forwarded {
			ch <- prometheus.MustNewConstMetric(p.forwardCount, prometheus.CounterValue, float64(c.Packets), dir)
			ch <- prometheus.MustNewConstMetric(p.forwardBytes, prometheus.CounterValue, float64(c.Bytes), dir)
			continue
		}
		reason := c.Reason.String()
		ch <- prometheus.MustNewConstMetric(p.dropCount, prometheus.CounterValue, float64(c.Packets), reason, dir)
		ch <- prometheus.MustNewConstMetric(p.dropBytes, prometheus.CounterValue, float64(c.Bytes), reason, dir)
	}
}

// directionLabel is Cilium's label value: INGRESS, EGRESS or UNKNOWN.
func directionLabel(c datapath.Counter) string {
	switch c.Direction {
	case spec.Ingress, spec.Egress:
		return strings.ToUpper(c.Direction.String())
	}
	return "UNKNOWN"
}
