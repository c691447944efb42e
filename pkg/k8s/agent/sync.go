package agent

import (
	"context"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
)

// resync repairs what events missed.
const resync = 10 * time.Minute

// SyncJobs adds to g a job that calls sync once at start, after every
// change of the watchers' objects (w may be nil: Kubernetes off) or of
// the local endpoints, every resync, and again with backoff after a
// failure. Changes that arrive while sync runs are merged into one call.
func SyncJobs(g job.Group, name string, db *statedb.DB, eps statedb.Table[*endpoint.Desired], w *Watchers,
	sync func(context.Context, []endpoint.Endpoint) error) {
	wake := job.NewTrigger()
	if w != nil {
		w.OnChange(wake.Trigger)
	}
	g.Add(job.OneShot(name+"-endpoints", func(ctx context.Context, _ cell.Health) error {
		for {
			_, watch := eps.AllWatch(db.ReadTxn())
			select {
			case <-ctx.Done():
				return nil
			case <-watch:
				wake.Trigger()
			}
		}
	}))
	retry := time.Second
	g.Add(job.Timer(name, func(ctx context.Context) error {
		var local []endpoint.Endpoint
		for d := range eps.All(db.ReadTxn()) {
			local = append(local, d.Endpoint)
		}
		if err := sync(ctx, local); err != nil {
			time.AfterFunc(retry, wake.Trigger)
			retry = min(2*retry, time.Minute)
			return err
		}
		retry = time.Second
		return nil
	}, resync, job.WithTrigger(wake)))
}
