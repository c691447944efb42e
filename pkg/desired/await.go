package desired

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
)

// Await returns once the kernel holds every row that q finds in tbl, each
// as written at revision rev or later (0: as it is now): nil when the
// reconciler is done with all of them, or when they are gone. A query
// may find one row (an endpoint by its ID) or many (an endpoint's policy
// entries). A tombstone is done once gone: it leaves its table only after
// the reconciler removed what it stood for (see CollectTombstones), and
// its key is free then. A failed attempt returns its error at once; the
// reconciler goes on retrying.
func Await[Obj Row[Obj]](ctx context.Context, db *statedb.DB, tbl statedb.Table[Obj], q statedb.Query[Obj], rev statedb.Revision) error {
	for {
		rows, watch := tbl.ListWatch(db.ReadTxn(), q)
		done := true
		for row, rowRev := range rows {
			if rowRev < rev {
				done = false
				continue
			}
			switch s := row.GetStatus(); s.Kind {
			case reconciler.StatusKindDone:
				if t, ok := any(row).(interface{ IsTombstone() bool }); ok && t.IsTombstone() {
					done = false
				}
			case reconciler.StatusKindError:
				return errors.New(s.GetError())
			default:
				done = false
			}
		}
		if done {
			return nil
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return fmt.Errorf("%s: not in the kernel yet: %w", tbl.Name(), context.Cause(ctx))
		}
	}
}
