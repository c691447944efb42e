package desired

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
)

// Await returns once the kernel holds the row that q finds in tbl, as
// written at revision rev or later (0: as it is now): nil when its
// reconciler is done with it, or when the row is gone. A tombstone is
// done once gone: it leaves its table only after the reconciler removed
// what it stood for (see CollectTombstones), and its key is free then.
// A failed attempt returns its error at once; the reconciler goes on
// retrying.
func Await[Obj Row[Obj]](ctx context.Context, db *statedb.DB, tbl statedb.Table[Obj], q statedb.Query[Obj], rev statedb.Revision) error {
	for {
		row, rowRev, watch, ok := tbl.GetWatch(db.ReadTxn(), q)
		if !ok {
			return nil
		}
		if rowRev >= rev {
			switch s := row.GetStatus(); s.Kind {
			case reconciler.StatusKindDone:
				if t, ok := any(row).(interface{ IsTombstone() bool }); !ok || !t.IsTombstone() {
					return nil
				}
			case reconciler.StatusKindError:
				return errors.New(s.GetError())
			}
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return fmt.Errorf("%s: not in the kernel yet: %w", tbl.Name(), context.Cause(ctx))
		}
	}
}
