package nodedatapath

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/hive/job"

	"github.com/cilium-go/cilium/internal/datapath"
)

// registerConntrackGC deletes expired conntrack entries every
// --conntrack-gc-interval. The LRU map evicts under pressure anyway;
// collecting keeps closed connections from crowding out live ones.
func registerConntrackGC(g job.Group, n *datapath.Node, c Config, log *slog.Logger) {
	g.Add(job.Timer("conntrack-gc", func(context.Context) error {
		maps := n.Maps()
		if maps == nil {
			return nil // the datapath has not started yet
		}
		now, err := datapath.Monotonic()
		if err != nil {
			return err
		}
		deleted, err := maps.CollectConntrack(now)
		if err != nil {
			return fmt.Errorf("conntrack gc: %w", err)
		}
		if deleted > 0 {
			log.Debug("conntrack gc", "deleted", deleted)
		}
		return nil
	}, c.ConntrackGCInterval))
}

// DefaultConntrackGCInterval is how often expired connections go.
const DefaultConntrackGCInterval = time.Minute
