package datapath

import (
	"context"
	"log/slog"
	"time"
)

// RunConntrackGC deletes expired conntrack entries every interval until
// ctx ends. The LRU map evicts under pressure anyway; collecting keeps
// closed connections from crowding out live ones. It is a job for the
// agent's lifecycle, not something NewNode starts.
func (m *Maps) RunConntrackGC(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := Monotonic()
		if err != nil {
			log.Warn("conntrack gc", "error", err)
			continue
		}
		n, err := m.CollectConntrack(now)
		if err != nil {
			log.Warn("conntrack gc", "error", err, "deleted", n)
			continue
		}
		if n > 0 {
			log.Debug("conntrack gc", "deleted", n)
		}
	}
}
