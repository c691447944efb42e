package desired_test

import (
	"context"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/health"
)

// A controller whose input is a Signal runs once at start, then once
// per fire; the fires that come while it runs merge into one more run,
// and without a fire it does not run.
func TestSignal(t *testing.T) {
	s := desired.NewSignal()
	// Each run says it started, then waits for the test to let it end.
	started, end := make(chan struct{}, 16), make(chan struct{})
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell,
		cell.Module("signal-test", "Controller woken by a Signal",
			health.JobGroup,
			cell.Invoke(func(g job.Group, db *statedb.DB) {
				desired.Controller(g, "test", db, []desired.Input{s.Input()},
					func(ctx context.Context, _ statedb.ReadTxn) error {
						started <- struct{}{}
						select {
						case <-end:
						case <-ctx.Done():
						}
						return nil
					})
			})))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })
	run := func(what string) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("no run %s", what)
		}
	}
	none := func(after string) {
		t.Helper()
		select {
		case <-started:
			t.Fatalf("a run %s", after)
		case <-time.After(time.Second):
		}
	}

	run("at start")
	end <- struct{}{}
	none("with no fire")

	s.Fire()
	run("after a fire")
	end <- struct{}{}
	none("after the run of a single fire")

	s.Fire()
	run("after another fire")
	for range 3 {
		s.Fire()
	}
	end <- struct{}{}
	run("after fires during a run")
	end <- struct{}{}
	none("after the run of fires that merged")
}
