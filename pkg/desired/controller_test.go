package desired_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
)

// A controller runs once at start, with nothing changed (that first run
// is what lets the tables it writes prune what an earlier agent left),
// again after each change of an input, and again after a failure without
// anything changing.
func TestController(t *testing.T) {
	runs := make(chan int, 16) // endpoints seen by each run
	var fail atomic.Bool
	var db *statedb.DB
	var eps statedb.RWTable[*endpoint.EndpointRow]
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell,
		cell.Provide(endpoint.NewTable),
		cell.Module("controller-test", "Controller under test",
			health.JobGroup,
			cell.Invoke(func(g job.Group, d *statedb.DB, t statedb.RWTable[*endpoint.EndpointRow]) {
				db, eps = d, t
				desired.Controller(g, "test", d, []desired.Input{desired.TableInput[*endpoint.EndpointRow](t)},
					func(_ context.Context, txn statedb.ReadTxn) error {
						// Whether the run fails is settled before the
						// test hears of it, and sets fail for the next.
						var err error
						if fail.Load() {
							err = errors.New("no")
						}
						runs <- len(endpoint.Local(txn, t))
						return err
					})
			})))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })
	next := func(what string) int {
		t.Helper()
		select {
		case n := <-runs:
			return n
		case <-time.After(30 * time.Second):
			t.Fatalf("no run %s", what)
			return 0
		}
	}
	if n := next("at start"); n != 0 {
		t.Errorf("first run saw %d endpoints, want none", n)
	}
	txn := db.WriteTxn(eps)
	_, _, _ = eps.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: 7}})
	txn.Commit()
	if n := next("after an input changed"); n != 1 {
		t.Errorf("run after the insert saw %d endpoints, want 1", n)
	}
	fail.Store(true)
	txn = db.WriteTxn(eps)
	_, _, _ = eps.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: 8}})
	txn.Commit()
	next("after a second change")
	fail.Store(false)
	next("after a failure") // the retry, with nothing changed
	select {
	case <-runs:
		t.Error("a run with nothing changed, after a run that succeeded")
	case <-time.After(3 * time.Second):
	}
}
