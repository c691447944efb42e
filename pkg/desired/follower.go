package desired

import (
	"fmt"

	"github.com/cilium/statedb"
)

// Follower reads an input table's changes since its last read: the input
// of a controller that recomputes only what the changed rows bear on. A
// nil Follower is an input that is not there (a table its cell did not
// get): it has no changes and is no input.
type Follower[T any] struct {
	tbl     statedb.Table[T]
	changes statedb.ChangeIterator[T]
}

// Follow starts following tbl's changes; the first read gives every row
// as a change. A nil tbl gives a nil Follower. Start it before the
// controller, so that no change falls before its first read.
func Follow[T any](db *statedb.DB, tbl statedb.Table[T]) (*Follower[T], error) {
	if tbl == nil {
		return nil, nil
	}
	txn := db.WriteTxn(tbl)
	defer txn.Abort()
	changes, err := tbl.Changes(txn)
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", tbl.Name(), err)
	}
	txn.Commit()
	return &Follower[T]{tbl: tbl, changes: changes}, nil
}

// followed is a Follower of any table.
type followed interface{ input() (Input, bool) }

// Inputs are the tables of the followers that are there, as a
// controller's inputs.
func Inputs(fs ...followed) []Input {
	var ins []Input
	for _, f := range fs {
		if in, ok := f.input(); ok {
			ins = append(ins, in)
		}
	}
	return ins
}

func (f *Follower[T]) input() (Input, bool) {
	if f == nil {
		return Input{}, false
	}
	return TableInput(f.tbl), true
}

// Next calls fn with every change up to txn not read yet, in order.
func (f *Follower[T]) Next(txn statedb.ReadTxn, fn func(obj T, deleted bool)) {
	if f == nil {
		return
	}
	changes, _ := f.changes.Next(txn)
	for c := range changes {
		fn(c.Object, c.Deleted)
	}
}

// Table is the table followed, to look rows up in; nil for a nil
// Follower.
func (f *Follower[T]) Table() statedb.Table[T] {
	if f == nil {
		return nil
	}
	return f.tbl
}
