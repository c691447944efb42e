package tables

import (
	"context"
	"fmt"

	"github.com/cilium/statedb"
	"k8s.io/client-go/tools/cache"
)

// Follow calls h with t's changes, in order, until ctx ends: what t holds
// already as adds first, then each change as an add, update (with the
// object it replaces) or delete. Changes that come faster than h takes
// them merge, as an informer's do when its handler is slow: h hears an
// object's latest state, and nothing of an object that came and went in
// between. synced closes once h has had the whole first list. It is how
// code written as informer handlers reads a table.
func Follow[T Object](ctx context.Context, db *statedb.DB, t statedb.Table[T], h cache.ResourceEventHandler) (synced <-chan struct{}, err error) {
	txn := db.WriteTxn(t)
	changes, err := t.Changes(txn)
	txn.Commit()
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", t.Name(), err)
	}
	done := make(chan struct{})
	go func() {
		last := map[string]T{}
		listed := false
		for {
			rtxn := db.ReadTxn()
			initialized, initWatch := t.Initialized(rtxn)
			batch, watch := changes.Next(rtxn)
			for c := range batch {
				k := Key(c.Object)
				old, had := last[k]
				switch {
				case c.Deleted && had:
					delete(last, k)
					h.OnDelete(c.Object)
				case c.Deleted:
					// Added and deleted between two looks: nobody
					// heard of it, so there is nothing to take back.
				case had:
					last[k] = c.Object
					h.OnUpdate(old, c.Object)
				default:
					last[k] = c.Object
					h.OnAdd(c.Object, !listed)
				}
			}
			if initialized && !listed {
				listed = true
				close(done)
			}
			if listed {
				initWatch = nil // closed: it would wake the loop forever
			}
			select {
			case <-ctx.Done():
				return
			case <-watch:
			case <-initWatch:
			}
		}
	}()
	return done, nil
}
