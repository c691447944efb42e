package desired

import (
	"context"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
)

// Tombstone is a row that can stand for a removal: a deleted row stays
// in its table, marked, until its reconciler removed from the kernel what
// it stood for. Meanwhile its key stays taken, and whoever waits for the
// removal (Await) or counts it (a realized revision) sees when it is done.
// The reconciler's Update removes a tombstone's object; its Prune keeps
// none of them.
type Tombstone[Obj any] interface {
	Row[Obj]
	IsTombstone() bool
}

// CollectTombstones adds to g the one job that deletes tbl's tombstones
// (what tombstones finds under true) once their reconciler is done with
// them. A tombstone is taken out in the transaction that sees it done,
// so a row written again meanwhile is never lost.
func CollectTombstones[Obj Tombstone[Obj]](g job.Group, db *statedb.DB, tbl statedb.RWTable[Obj], tombstones statedb.Index[Obj, bool]) {
	g.Add(job.OneShot(tbl.Name()+"-tombstones", func(ctx context.Context, _ cell.Health) error {
		for {
			rows, watch := tbl.ListWatch(db.ReadTxn(), tombstones.Query(true))
			for row := range rows {
				if row.GetStatus().Kind == reconciler.StatusKindDone {
					collectDone(db, tbl, tombstones)
					break
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-watch:
			}
		}
	}))
}

// collectDone deletes, in one transaction, the tombstones whose removal is
// done.
func collectDone[Obj Tombstone[Obj]](db *statedb.DB, tbl statedb.RWTable[Obj], tombstones statedb.Index[Obj, bool]) {
	txn := db.WriteTxn(tbl)
	var done []Obj
	for row := range tbl.List(txn, tombstones.Query(true)) {
		if row.GetStatus().Kind == reconciler.StatusKindDone {
			done = append(done, row)
		}
	}
	for _, row := range done {
		// The row was found in this transaction: it is there.
		_, _, _ = tbl.Delete(txn, row)
	}
	txn.Commit()
}
