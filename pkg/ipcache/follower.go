package ipcache

import (
	"fmt"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
)

// follower reads an input table's changes. A nil follower is an input
// that is not there (the Kubernetes tables in tests without them, the
// prefixes without the policy engine): it has no changes.
type follower[T any] struct {
	tbl     statedb.Table[T]
	changes statedb.ChangeIterator[T]
}

// follow starts following tbl's changes, nil when tbl is; the first
// error goes to *err and ends the following of later tables.
func follow[T any](db *statedb.DB, tbl statedb.Table[T], err *error) *follower[T] {
	if tbl == nil || *err != nil {
		return nil
	}
	txn := db.WriteTxn(tbl)
	changes, cerr := tbl.Changes(txn)
	txn.Commit()
	if cerr != nil {
		*err = fmt.Errorf("follow %s: %w", tbl.Name(), cerr)
		return nil
	}
	return &follower[T]{tbl: tbl, changes: changes}
}

// input is the table as the controller's input.
func (f *follower[T]) input() (desired.Input, bool) {
	if f == nil {
		return desired.Input{}, false
	}
	return desired.TableInput(f.tbl), true
}

// next calls fn with every change up to txn not seen yet, in order.
func (f *follower[T]) next(txn statedb.ReadTxn, fn func(obj T, deleted bool)) {
	if f == nil {
		return
	}
	changes, _ := f.changes.Next(txn)
	for c := range changes {
		fn(c.Object, c.Deleted)
	}
}
