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
// programmed, every tombstone unprogrammed (and then collected), the rest
// pruned once the table is initialized (after Restore) and every
// desired.PruneInterval. Register it before the hook that calls Restore,
// so that Restore can wait for it.
func RegisterReconciler(p reconciler.Params, m *Manager, dp Datapath) error {
	if _, err := desired.Register(p, m.tbl, ops{dp: dp}); err != nil {
		return err
	}
	desired.CollectTombstones(p.JobGroup, p.DB, m.tbl, TombstoneIndex)
	return nil
}

type ops struct{ dp Datapath }

// Update implements reconciler.Operations: it programs a row, and
// unprograms a tombstone.
func (o ops) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, d *EndpointRow) error {
	if d.Deleted {
		return o.dp.DeleteEndpoint(d.datapathEndpoint())
	}
	return o.dp.UpsertEndpoint(d.datapathEndpoint())
}

// Delete implements reconciler.Operations. Only tombstones leave the
// table, once unprogrammed: there is nothing left to do.
func (o ops) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *EndpointRow) error {
	return nil
}

// Prune implements reconciler.Operations: the datapath keeps the live
// rows' endpoints only.
func (o ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*EndpointRow, statedb.Revision]) error {
	var keep []spec.Endpoint
	for d := range rows {
		if !d.Deleted {
			keep = append(keep, d.datapathEndpoint())
		}
	}
	return o.dp.PruneEndpoints(keep)
}
