package loadbalancer

import (
	"context"
	"sync"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
)

// waitReconciled returns once a reconciler has written its table into
// the kernel up to rev: every change up to rev tried, none of them
// failing still.
type waitReconciled func(ctx context.Context, rev statedb.Revision) error

// untilReconciled is waitReconciled for r.
func untilReconciled[Obj any](r reconciler.Reconciler[Obj]) waitReconciled {
	return func(ctx context.Context, rev statedb.Revision) error {
		for {
			cur, low, err := r.WaitUntilReconciled(ctx, rev)
			if err != nil {
				return err
			}
			if low == 0 || low > rev {
				return nil
			}
			// A change up to rev failed and waits for its retry. A
			// retried update moves the reconciler on (it writes the
			// row's status), a retried delete does not: look again
			// now and then (the deadline is no error).
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_, _, _ = r.WaitUntilReconciled(wctx, cur+1)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

// progress follows one reconciler for the controller: how far the
// kernel holds what the table says, so that room drained from the table
// can be used again.
type progress struct {
	wait waitReconciled // nil: no kernel behind the table (tests)

	mu         sync.Mutex
	want, have statedb.Revision
	kick       chan struct{}
}

func newProgress(wait waitReconciled) *progress {
	return &progress{wait: wait, kick: make(chan struct{}, 1)}
}

// await asks to be told once the reconciler reaches rev.
func (f *progress) await(rev statedb.Revision) {
	f.mu.Lock()
	f.want = max(f.want, rev)
	if f.wait == nil {
		f.have = f.want
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// reached is the revision up to which the kernel holds the table.
func (f *progress) reached() statedb.Revision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.have
}

// run waits for the revisions asked for and calls notify for each
// reached, until ctx ends.
func (f *progress) run(ctx context.Context, notify func()) {
	if f.wait == nil {
		return
	}
	for {
		f.mu.Lock()
		want, have := f.want, f.have
		f.mu.Unlock()
		if want <= have {
			select {
			case <-ctx.Done():
				return
			case <-f.kick:
			}
			continue
		}
		if err := f.wait(ctx, want); err != nil {
			return
		}
		f.mu.Lock()
		f.have = max(f.have, want)
		f.mu.Unlock()
		notify()
	}
}
