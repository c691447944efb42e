package datapath

import (
	"fmt"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Counter is the per-reason, per-direction packet and byte count,
// summed over CPUs.
type Counter struct {
	Reason    spec.Reason
	Direction spec.Direction
	Packets   uint64
	Bytes     uint64
}

// Counters reads the metrics map, an array indexed by reason << 2 |
// direction (METRICS_INDEX in bpf/lib/common.h). Its slots exist from
// the start; only those that counted a packet are returned.
func (m *Maps) Counters() ([]Counter, error) {
	var out []Counter
	var k uint32
	var per []MetricsValue
	it := m.Metrics.Iterate()
	for it.Next(&k, &per) {
		c := Counter{Reason: spec.Reason(k >> 2), Direction: spec.Direction(k & 3)}
		for _, v := range per {
			c.Packets += v.Packets
			c.Bytes += v.Bytes
		}
		if c.Packets > 0 {
			out = append(out, c)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate metrics: %w", err)
	}
	return out, nil
}
