package desired

import (
	"context"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
)

// Input is what a controller reads: a table, or a Signal.
type Input struct {
	// Watch is, as of a read transaction, the channel that closes at the
	// input's next change.
	Watch func(statedb.ReadTxn) <-chan struct{}
	// Table tells whether the input holds everything yet (a table of
	// Kubernetes objects before its first list does not); nil for an
	// input that is whole from the start.
	Table statedb.TableMeta
}

// TableInput is a whole table as an input.
func TableInput[T any](t statedb.Table[T]) Input {
	return Input{Table: t, Watch: func(txn statedb.ReadTxn) <-chan struct{} {
		_, watch := t.AllWatch(txn)
		return watch
	}}
}

// awaitInitialized returns once every input table is initialized, or
// ctx's error.
func awaitInitialized(ctx context.Context, db *statedb.DB, inputs []Input) error {
	for _, in := range inputs {
		if in.Table == nil {
			continue
		}
		_, initialized := in.Table.Initialized(db.ReadTxn())
		select {
		case <-initialized:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// The controller's backoff after a failed run.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// Controller adds to g the intake shape of the agent: run computes what
// its inputs want and writes it (through a Writer, into a desired-state
// table), once every input is initialized (a first run on half the
// cluster would let the reconcilers prune what the rest still needs),
// then after every change of an input, and again with backoff after a
// failure. Changes that come while run runs merge
// into one more run. run reads the inputs through the transaction it is
// given, whose watch channels are already taken, so that no change falls
// between what run read and the next wait.
func Controller(g job.Group, name string, db *statedb.DB, inputs []Input,
	run func(context.Context, statedb.ReadTxn) error) {
	g.Add(job.OneShot(name, func(ctx context.Context, h cell.Health) error {
		if err := awaitInitialized(ctx, db, inputs); err != nil {
			return nil // stopped before it started
		}
		retry := retryMin
		for {
			txn := db.ReadTxn()
			ws := statedb.NewWatchSet()
			for _, in := range inputs {
				ws.Add(in.Watch(txn))
			}
			var again <-chan time.Time
			if err := run(ctx, txn); err != nil {
				h.Degraded("run failed, retrying", err)
				again = time.After(retry)
				retry = min(2*retry, retryMax)
			} else {
				h.OK("in step with its inputs")
				retry = retryMin
			}
			if err := wait(ctx, ws, again); err != nil {
				return nil
			}
		}
	}))
}

// wait returns when an input changed or again came, or ctx's error when
// it ended first.
func wait(ctx context.Context, ws *statedb.WatchSet, again <-chan time.Time) error {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		_, _ = ws.Wait(waitCtx, 0) // its error is waitCtx's, which the select below sees
	}()
	select {
	case <-changed:
	case <-again:
	}
	return ctx.Err()
}
