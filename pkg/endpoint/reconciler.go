package endpoint

import (
	"context"
	"iter"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
)

// Datapath programs endpoints into the kernel; *datapath.Node is one. Only
// the endpoint reconciler calls it.
type Datapath interface {
	UpsertEndpoint(spec.Endpoint) error
	DeleteEndpoint(spec.Endpoint) error
	// PruneEndpoints forgets every endpoint not in keep.
	PruneEndpoints(keep []spec.Endpoint) error
}

// RegisterReconciler makes dp hold what m's table says: every row
// programmed, every removed row unprogrammed, the rest pruned once the
// table is initialized (after Restore) and every desired.PruneInterval.
// Register it before the hook that calls Restore, so that Restore can
// wait for it.
func RegisterReconciler(p reconciler.Params, m *Manager, dp Datapath) error {
	_, err := desired.Register(p, m.tbl, ops{dp: dp, m: m})
	return err
}

type ops struct {
	dp Datapath
	m  *Manager
}

// Update implements reconciler.Operations.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, d *Desired) error {
	return o.dp.UpsertEndpoint(d.datapathEndpoint())
}

// Delete implements reconciler.Operations. The endpoint's id is free for
// a new endpoint only once its old programs are gone.
func (o ops) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, d *Desired) error {
	if err := o.dp.DeleteEndpoint(d.datapathEndpoint()); err != nil {
		o.m.unprogramFailed(d.ID, err)
		return err
	}
	o.m.unprogrammed(d.ID)
	return nil
}

// Prune implements reconciler.Operations.
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*Desired, statedb.Revision]) error {
	var keep []spec.Endpoint
	ids := map[uint16]bool{}
	for d := range rows {
		keep = append(keep, d.datapathEndpoint())
		ids[d.ID] = true
	}
	if err := o.dp.PruneEndpoints(keep); err != nil {
		return err
	}
	o.m.prunedExcept(ids)
	return nil
}
