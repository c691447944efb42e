package endpoint

import (
	"context"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
)

// resync repairs what events missed.
const resync = 10 * time.Minute

// Changes wakes a sync job when something it reads besides the endpoints
// changed; the Kubernetes watchers are one.
type Changes interface {
	OnChange(fn func()) (stop func())
}

// SyncJobs adds to g a job that calls sync with the local endpoints once
// at start, after every change of the endpoints table or of changes (nil:
// none), every resync, and again with backoff after a failure. Changes
// that arrive while sync runs are merged into one call.
func SyncJobs(g job.Group, name string, db *statedb.DB, eps statedb.Table[*Desired], changes Changes,
	sync func(context.Context, []Endpoint) error) {
	// The timer runs only when woken: once the endpoints are watched, then
	// on changes. Each wake comes after its watch channel was taken, so no
	// change falls between a sync's read and the next watch (one did when
	// the first wake came before this job had started watching: an
	// endpoint inserted then waited for the resync).
	wake := job.NewTrigger()
	if changes != nil {
		changes.OnChange(wake.Trigger)
	}
	g.Add(job.OneShot(name+"-endpoints", func(ctx context.Context, _ cell.Health) error {
		for {
			_, watch := eps.AllWatch(db.ReadTxn())
			wake.Trigger()
			select {
			case <-ctx.Done():
				return nil
			case <-watch:
			}
		}
	}))
	retry := time.Second
	g.Add(job.Timer(name, func(ctx context.Context) error {
		var local []Endpoint
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
