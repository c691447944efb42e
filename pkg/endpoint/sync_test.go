package endpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
)

// A sync job runs once at start, with no endpoints and nothing changing:
// that first run is what lets the tables it writes prune what an earlier
// agent left behind.
func TestSyncJobsRunAtStart(t *testing.T) {
	ran := make(chan []endpoint.Endpoint, 1)
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell,
		cell.Provide(endpoint.NewTable, statedb.RWTable[*endpoint.Desired].ToTable),
		cell.Module("sync-test", "Sync jobs under test",
			health.JobGroup,
			cell.Invoke(func(g job.Group, db *statedb.DB, eps statedb.Table[*endpoint.Desired]) {
				endpoint.SyncJobs(g, "test", db, eps, nil, func(_ context.Context, local []endpoint.Endpoint) error {
					select {
					case ran <- local:
					default:
					}
					return nil
				})
			})))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })
	select {
	case local := <-ran:
		if len(local) != 0 {
			t.Errorf("first sync with %v, want no endpoints", local)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no sync at start")
	}
}
