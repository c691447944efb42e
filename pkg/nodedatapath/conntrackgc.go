package nodedatapath

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"

	"github.com/cilium-go/cilium/internal/datapath"
)

// registerConntrackGC deletes expired conntrack entries, at least every
// --conntrack-gc-interval and more often while connections come and go
// fast (nextConntrackGC).
func registerConntrackGC(g job.Group, n *datapath.Node, c Config, log *slog.Logger) {
	g.Add(job.OneShot("conntrack-gc", func(ctx context.Context, h cell.Health) error {
		wait := min(firstConntrackGC, c.ConntrackGCInterval)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			maps := n.Maps()
			if maps == nil {
				continue // the datapath has not started yet
			}
			now, err := datapath.Monotonic()
			if err != nil {
				return err
			}
			deleted, err := maps.CollectConntrack(now)
			if err != nil {
				h.Degraded("conntrack gc", fmt.Errorf("conntrack gc: %w", err))
				continue
			}
			h.OK("collected")
			wait = nextConntrackGC(wait, c.ConntrackGCInterval, deleted, int(maps.CT4.MaxEntries()))
			if deleted > 0 {
				log.Debug("conntrack gc", "deleted", deleted, "next", wait)
			}
		}
	}))
}

// DefaultConntrackGCInterval is the longest wait between two passes.
const DefaultConntrackGCInterval = time.Minute

const (
	// firstConntrackGC is the wait before the first pass; quiet tables
	// then wait longer, up to --conntrack-gc-interval.
	firstConntrackGC = 10 * time.Second
	// minConntrackGC bounds how often a busy table is collected.
	minConntrackGC = 5 * time.Second
)

// nextConntrackGC is the wait before the next pass, given the last wait
// and what it let expire. The conntrack map is an LRU map: full, it
// makes room by evicting, and under pressure the kernel may take a
// connection's entry created a moment before, whose next segment is then
// dropped as starting no connection. So dead entries must not fill it:
// the wait aims for a quarter of the table at most to expire between two
// passes, between minConntrackGC (or longest, when shorter) and longest,
// and grows at most twofold at a time when the table is quiet.
func nextConntrackGC(last, longest time.Duration, deleted, capacity int) time.Duration {
	next := longest
	if deleted > 0 {
		next = time.Duration(float64(last) * float64(capacity) / 4 / float64(deleted))
	}
	return max(min(minConntrackGC, longest), min(next, 2*last, longest))
}
