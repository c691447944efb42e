package ipcache

import (
	"fmt"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
)

// PruneInterval is how often the reconciler compares the whole map with
// the table, repairing what was changed behind its back.
const PruneInterval = time.Minute

// RegisterReconciler registers the statedb reconciler of tbl against the
// map getMap returns; its jobs start with p's job group and report to
// that group's health.
func RegisterReconciler(p reconciler.Params, tbl statedb.RWTable[*Entry], getMap MapSource) (reconciler.Reconciler[*Entry], error) {
	r, err := reconciler.Register(p, tbl,
		(*Entry).clone, (*Entry).setStatus, (*Entry).getStatus,
		NewOps(getMap), nil,
		reconciler.WithName(TableName),
		reconciler.WithPruning(PruneInterval),
		reconciler.WithRetry(100*time.Millisecond, time.Minute),
	)
	if err != nil {
		return nil, fmt.Errorf("register ipcache reconciler: %w", err)
	}
	return r, nil
}
