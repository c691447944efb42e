// Package desired is what the agent's desired-state tables share: each
// table holds rows the kernel should hold, one Writer replaces or updates
// its contents, and a statedb reconciler, registered with the agent's
// defaults, makes the kernel match it.
package desired

import (
	"fmt"
	"sync"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"golang.org/x/time/rate"
)

// Row is a table row the reconciler writes its status into. Clone
// returns a copy that the reconciler may change; WithStatus sets the
// status on the row it is called on and returns it.
type Row[Obj any] interface {
	comparable
	Clone() Obj
	GetStatus() reconciler.Status
	WithStatus(reconciler.Status) Obj
}

// PruneInterval is how often a reconciler compares the kernel with its
// whole table, removing what nobody wants and restoring what is missing.
const PruneInterval = time.Minute

// Option changes how Register registers a reconciler.
type Option[Obj any] func(*options[Obj])

type options[Obj any] struct {
	batch     reconciler.BatchOperations[Obj]
	roundSize int
}

// WithBatches writes new and changed rows through batch, up to roundSize
// rows a round, instead of one at a time; rows retried after a failure
// still go one at a time through the Operations.
func WithBatches[Obj any](batch reconciler.BatchOperations[Obj], roundSize int) Option[Obj] {
	return func(o *options[Obj]) { o.batch, o.roundSize = batch, roundSize }
}

// Register registers the reconciler of tbl with ops, named after the
// table, pruning every PruneInterval (once the table is initialized) and
// retrying failures with backoff.
func Register[Obj Row[Obj]](p reconciler.Params, tbl statedb.RWTable[Obj], ops reconciler.Operations[Obj], opts ...Option[Obj]) (reconciler.Reconciler[Obj], error) {
	var o options[Obj]
	for _, opt := range opts {
		opt(&o)
	}
	ropts := []reconciler.Option{
		reconciler.WithName(tbl.Name()),
		reconciler.WithPruning(PruneInterval),
		reconciler.WithRetry(100*time.Millisecond, time.Minute),
	}
	if o.roundSize > 0 {
		ropts = append(ropts, reconciler.WithRoundLimits(o.roundSize, rate.NewLimiter(1000, 1)))
	}
	r, err := reconciler.Register(p, tbl,
		Obj.Clone, Obj.WithStatus, Obj.GetStatus,
		ops, o.batch, ropts...)
	if err != nil {
		return nil, fmt.Errorf("register %s reconciler: %w", tbl.Name(), err)
	}
	return r, nil
}

// Writer replaces or updates a table's contents. It is the table's only
// writer.
type Writer[K comparable, Obj Row[Obj]] struct {
	db  *statedb.DB
	tbl statedb.RWTable[Obj]
	// get finds the row with key k; same tells whether two rows want the
	// same of the kernel (status aside).
	get  func(statedb.ReadTxn, K) (Obj, bool)
	key  func(Obj) K
	same func(a, b Obj) bool

	mu sync.Mutex
	// initDone marks the table initialized after the first Replace, so
	// that the reconciler prunes nothing before the desired state is
	// known (what a previous agent run left keeps working until then).
	initDone func(statedb.WriteTxn)
}

// NewWriter registers the writer as the table's initializer. Call it
// before the reconciler starts.
func NewWriter[K comparable, Obj Row[Obj]](db *statedb.DB, tbl statedb.RWTable[Obj], primary statedb.Index[Obj, K],
	key func(Obj) K, same func(a, b Obj) bool) *Writer[K, Obj] {
	txn := db.WriteTxn(tbl)
	done := tbl.RegisterInitializer(txn, tbl.Name()+"-writer")
	txn.Commit()
	get := func(txn statedb.ReadTxn, k K) (Obj, bool) {
		o, _, ok := tbl.Get(txn, primary.Query(k))
		return o, ok
	}
	return &Writer[K, Obj]{db: db, tbl: tbl, get: get, key: key, same: same, initDone: done}
}

// Replace makes the table hold exactly want, in one transaction. Rows
// that want the same as before are not rewritten, so the reconciler does
// not touch them again; new and changed rows go in pending. It returns
// how many rows it inserted or changed and how many it deleted.
func (w *Writer[K, Obj]) Replace(want map[K]Obj) (changed, deleted int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	txn := w.db.WriteTxn(w.tbl)
	defer txn.Abort() // a no-op after Commit
	var stale []Obj
	for o := range w.tbl.All(txn) {
		if _, ok := want[w.key(o)]; !ok {
			stale = append(stale, o)
		}
	}
	for _, o := range stale {
		if _, _, err := w.tbl.Delete(txn, o); err != nil {
			return 0, 0, fmt.Errorf("delete %v: %w", w.key(o), err)
		}
		deleted++
	}
	if changed, err = w.upsert(txn, want); err != nil {
		return 0, 0, err
	}
	w.commit(txn)
	return changed, deleted, nil
}

// Update writes the rows of want and deletes the rows of gone, in one
// transaction, leaving the other rows as they are: for a controller that
// recomputes only what its inputs' changes touched. Like Replace, it
// rewrites only the rows that changed, and its first call marks the table
// initialized, so that call must write everything.
func (w *Writer[K, Obj]) Update(want map[K]Obj, gone []K) (changed, deleted int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(want) == 0 && len(gone) == 0 && w.initDone == nil {
		return 0, 0, nil // nothing to write: the table stays unlocked
	}
	txn := w.db.WriteTxn(w.tbl)
	defer txn.Abort() // a no-op after Commit
	for _, k := range gone {
		o, ok := w.get(txn, k)
		if !ok {
			continue
		}
		if _, _, err := w.tbl.Delete(txn, o); err != nil {
			return 0, 0, fmt.Errorf("delete %v: %w", k, err)
		}
		deleted++
	}
	if changed, err = w.upsert(txn, want); err != nil {
		return 0, 0, err
	}
	w.commit(txn)
	return changed, deleted, nil
}

// upsert inserts the rows of want that are new or changed, as pending.
func (w *Writer[K, Obj]) upsert(txn statedb.WriteTxn, want map[K]Obj) (changed int, err error) {
	for k, o := range want {
		if cur, ok := w.get(txn, k); ok && w.same(cur, o) {
			continue
		}
		if _, _, err := w.tbl.Insert(txn, o.WithStatus(reconciler.StatusPending())); err != nil {
			return 0, fmt.Errorf("insert %v: %w", k, err)
		}
		changed++
	}
	return changed, nil
}

// commit commits txn, marking the table initialized the first time.
func (w *Writer[K, Obj]) commit(txn statedb.WriteTxn) {
	if w.initDone != nil {
		w.initDone(txn)
		w.initDone = nil
	}
	txn.Commit()
}
