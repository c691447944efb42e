package ipcache

import (
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/desired"
)

// RegisterReconciler registers the statedb reconciler of tbl against the
// map getMap returns; its jobs start with p's job group and report to
// that group's health. Its prune also repairs what was changed in the map
// behind its back.
func RegisterReconciler(p reconciler.Params, tbl statedb.RWTable[*EntryRow], getMap MapSource) (reconciler.Reconciler[*EntryRow], error) {
	return desired.Register(p, tbl, newOps(getMap))
}
