package agent

import (
	"context"
	"errors"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/policy"
)

// Map is the datapath's policy maps, one per endpoint; *datapath.Maps is
// one.
type Map interface {
	// UpdatePolicy makes the endpoint's groups named in groups hold
	// exactly their entries (none: the group goes), never leaving the
	// endpoint more open than both its old and its new policy; or
	// changes nothing and fails (datapath.ErrMapFull: its map cannot
	// hold it). narrowed reports that an allow went.
	UpdatePolicy(ep uint16, groups map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed bool, err error)
	// SyncPolicy makes the maps hold exactly these groups and returns
	// the endpoints whose policy narrowed.
	SyncPolicy(groups map[spec.PolicyGroup][]spec.PolicyEntry) (narrowed []uint16, err error)
	// FlushDisallowed forgets the endpoints' established connections
	// that their policies no longer allow.
	FlushDisallowed(endpointIDs ...uint16) error
}

// MapSource returns the datapath's policy map, or nil while the datapath
// has not opened its maps yet.
type MapSource func() Map

// errNoMap is returned while the datapath has not opened its maps yet;
// the reconciler retries.
var errNoMap = errors.New("policy map not open yet")

// RegisterReconciler makes the maps that source gives hold what tbl
// says, and forgets the connections that narrowed policies no longer
// allow. Rows are written by the batch, an endpoint at a time: every
// group of an endpoint that a batch changes goes in one update, in the
// order that never opens the endpoint beyond its old and its new policy.
// A round takes up to roundSize rows, enough for what one policy change
// writes.
func RegisterReconciler(p reconciler.Params, jobs job.Group, tbl statedb.RWTable[*PolicyEntryRow], source MapSource, cookies *policy.Cookies) error {
	o := &ops{tbl: tbl, source: source, cookies: cookies, flush: job.NewTrigger(), dirty: map[uint16]struct{}{}}
	jobs.Add(job.Timer("policy-flush", o.flushDirty, flushInterval, job.WithTrigger(o.flush)))
	_, err := desired.Register(p, tbl, o, desired.WithBatches[*PolicyEntryRow](o, roundSize))
	return err
}

// roundSize is how many rows a reconciliation round takes at most.
const roundSize = 1 << 16

// flushInterval retries flushes that failed; changes trigger them.
const flushInterval = time.Minute

type ops struct {
	tbl     statedb.Table[*PolicyEntryRow]
	source  MapSource
	cookies *policy.Cookies
	flush   job.Trigger

	mu    sync.Mutex
	dirty map[uint16]struct{} // endpoints whose connections to judge again
}

func (o *ops) mapOrErr() (Map, error) {
	if m := o.source(); m != nil {
		return m, nil
	}
	return nil, errNoMap
}

// groupEntries are the live entries of a group in txn, with the cookies
// of their origins.
func (o *ops) groupEntries(txn statedb.ReadTxn, g spec.PolicyGroup) []spec.PolicyEntry {
	var out []spec.PolicyEntry
	for e := range o.tbl.List(txn, GroupIndex.Query(g)) {
		if !e.Deleted {
			out = append(out, o.withCookie(e))
		}
	}
	return out
}

func (o *ops) withCookie(e *PolicyEntryRow) spec.PolicyEntry {
	ent := e.Entry
	ent.Cookie = o.cookies.Of(e.Origins)
	return ent
}

// update writes the named groups of an endpoint as txn has them.
func (o *ops) update(txn statedb.ReadTxn, ep uint16, groups map[spec.PolicyGroup]struct{}) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	want := make(map[spec.PolicyGroup][]spec.PolicyEntry, len(groups))
	for g := range groups {
		want[g] = o.groupEntries(txn, g)
	}
	narrowed, err := m.UpdatePolicy(ep, want)
	if narrowed {
		o.markDirty(ep)
	}
	return err
}

func (o *ops) markDirty(eps ...uint16) {
	o.mu.Lock()
	for _, ep := range eps {
		o.dirty[ep] = struct{}{}
	}
	o.mu.Unlock()
	o.flush.Trigger()
}

// flushDirty forgets the connections that narrowed policies no longer
// allow, for every endpoint marked since the last time.
func (o *ops) flushDirty(context.Context) error {
	o.mu.Lock()
	eps := o.dirty
	o.dirty = map[uint16]struct{}{}
	o.mu.Unlock()
	if len(eps) == 0 {
		return nil
	}
	m, err := o.mapOrErr()
	if err == nil {
		err = m.FlushDisallowed(slices.Collect(maps.Keys(eps))...)
	}
	if err != nil {
		// Again at the next interval, not at once.
		o.mu.Lock()
		maps.Copy(o.dirty, eps)
		o.mu.Unlock()
	}
	return err
}

// UpdateBatch implements reconciler.BatchOperations: each endpoint's
// changed groups in one update, whose result is every row's.
func (o *ops) UpdateBatch(_ context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*PolicyEntryRow]) {
	byEP := map[uint16]map[spec.PolicyGroup]struct{}{}
	for _, b := range batch {
		g := b.Object.group()
		if byEP[g.EndpointID] == nil {
			byEP[g.EndpointID] = map[spec.PolicyGroup]struct{}{}
		}
		byEP[g.EndpointID][g] = struct{}{}
	}
	results := make(map[uint16]error, len(byEP))
	for ep, groups := range byEP {
		results[ep] = o.update(txn, ep, groups)
	}
	for i := range batch {
		batch[i].Result = results[batch[i].Object.EndpointID]
	}
}

// DeleteBatch implements reconciler.BatchOperations: a tombstone's entry
// left the map when the tombstone was reconciled; any other row's group
// is written again.
func (o *ops) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*PolicyEntryRow]) {
	var live []reconciler.BatchEntry[*PolicyEntryRow]
	for _, b := range batch {
		if !b.Object.Deleted {
			live = append(live, b)
		}
	}
	o.UpdateBatch(ctx, txn, live)
	for i, j := 0, 0; i < len(batch); i++ {
		if !batch[i].Object.Deleted {
			batch[i].Result = live[j].Result
			j++
		}
	}
}

// Update implements reconciler.Operations, for a row retried alone: the
// endpoint's every group is written as txn has it, so that what failed
// with the row in its batch goes in together again.
func (o *ops) Update(_ context.Context, txn statedb.ReadTxn, _ statedb.Revision, e *PolicyEntryRow) error {
	groups := map[spec.PolicyGroup]struct{}{}
	for r := range o.tbl.List(txn, EntryEndpointIndex.Query(e.EndpointID)) {
		groups[r.group()] = struct{}{}
	}
	groups[e.group()] = struct{}{}
	return o.update(txn, e.EndpointID, groups)
}

// Delete implements reconciler.Operations, as DeleteBatch.
func (o *ops) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, e *PolicyEntryRow) error {
	if e.Deleted {
		return nil
	}
	return o.Update(ctx, txn, rev, e)
}

// Prune implements reconciler.Operations: the maps are made to hold
// exactly the table's groups, whatever an earlier agent or a hand left.
func (o *ops) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*PolicyEntryRow, statedb.Revision]) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	groups := map[spec.PolicyGroup][]spec.PolicyEntry{}
	for e := range rows {
		if !e.Deleted {
			groups[e.group()] = append(groups[e.group()], o.withCookie(e))
		}
	}
	narrowed, err := m.SyncPolicy(groups)
	if len(narrowed) > 0 {
		o.markDirty(narrowed...)
	}
	return err
}
