package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Counter is the per-reason, per-direction packet and byte count,
// summed over CPUs.
type Counter struct {
	Reason    Reason
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
		c := Counter{Reason: Reason(k >> 2), Direction: spec.Direction(k & 3)}
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

// Monotonic is the clock conntrack lifetimes are measured on.
func Monotonic() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read monotonic clock: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// CollectConntrack deletes the entries that expired before now (on the
// monotonic clock) and returns how many went.
func (m *Maps) CollectConntrack(now time.Duration) (int, error) {
	var stale []CTKey
	var k CTKey
	var v CTEntry
	it := m.CT4.Iterate()
	for it.Next(&k, &v) {
		if time.Duration(v.Expires) <= now {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("iterate conntrack: %w", err)
	}
	n := 0
	for i := range stale {
		err := m.CT4.Delete(&stale[i])
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, fmt.Errorf("delete conntrack entry: %w", err)
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}
