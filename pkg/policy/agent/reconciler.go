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
// writes. Entries that redirect to the layer-7 proxy wait for the
// proxy's acknowledgement in acks of the policy they belong to, for
// cfg.ProxyAckTimeout at most (see proxyGate); an endpoint whose changed
// rows redirect nothing never waits.
func RegisterReconciler(p reconciler.Params, jobs job.Group, tbl statedb.RWTable[*PolicyEntryRow], source MapSource, cookies *policy.Cookies,
	acks statedb.Table[*ProxyAckRow], cfg MapConfig) error {
	o := newOps(tbl, source, cookies, &proxyGate{db: p.DB, acks: acks, log: p.Log, timeout: cfg.ProxyAckTimeout})
	jobs.Add(job.Timer("policy-flush", o.flushDirty, flushInterval, job.WithTrigger(o.flush)))
	_, err := desired.Register(p, tbl, o, desired.WithBatches[*PolicyEntryRow](o, roundSize))
	return err
}

// roundSize is how many rows a reconciliation round takes at most.
const roundSize = 1 << 16

// flushInterval retries flushes that failed; changes trigger them.
const flushInterval = time.Minute

func newOps(tbl statedb.Table[*PolicyEntryRow], source MapSource, cookies *policy.Cookies, gate *proxyGate) *ops {
	return &ops{tbl: tbl, source: source, cookies: cookies, gate: gate, flush: job.NewTrigger(), dirty: map[uint16]struct{}{}}
}

type ops struct {
	tbl     statedb.Table[*PolicyEntryRow]
	source  MapSource
	cookies *policy.Cookies
	gate    *proxyGate
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
// changed groups in one update, whose result is every row's. The
// endpoints whose changed rows redirect to the proxy go last, once the
// proxy knows their policy; the others do not wait for it.
func (o *ops) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*PolicyEntryRow]) {
	byEP := map[uint16]map[spec.PolicyGroup]struct{}{}
	proxied := map[uint16]uint64{} // endpoint -> revision the proxy must know
	for _, b := range batch {
		g := b.Object.group()
		if byEP[g.EndpointID] == nil {
			byEP[g.EndpointID] = map[spec.PolicyGroup]struct{}{}
		}
		byEP[g.EndpointID][g] = struct{}{}
		if rev := redirect(b.Object); rev != 0 {
			proxied[g.EndpointID] = max(proxied[g.EndpointID], rev)
		}
	}
	results := make(map[uint16]error, len(byEP))
	for ep, groups := range byEP {
		if _, ok := proxied[ep]; !ok {
			results[ep] = o.update(txn, ep, groups)
		}
	}
	if len(proxied) > 0 {
		err := o.gate.await(ctx, slices.Max(slices.Collect(maps.Values(proxied))))
		for ep := range proxied {
			if results[ep] = err; err == nil {
				results[ep] = o.update(txn, ep, byEP[ep])
			}
		}
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
func (o *ops) Update(ctx context.Context, txn statedb.ReadTxn, _ statedb.Revision, e *PolicyEntryRow) error {
	groups := map[spec.PolicyGroup]struct{}{}
	for r := range o.tbl.List(txn, EntryEndpointIndex.Query(e.EndpointID)) {
		groups[r.group()] = struct{}{}
	}
	groups[e.group()] = struct{}{}
	if err := o.gate.await(ctx, redirect(e)); err != nil {
		return err
	}
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
// Every redirect it writes waits for the proxy, which knows them all
// already unless it is late or the table changed since the round began.
func (o *ops) Prune(ctx context.Context, _ statedb.ReadTxn, rows iter.Seq2[*PolicyEntryRow, statedb.Revision]) error {
	m, err := o.mapOrErr()
	if err != nil {
		return err
	}
	groups := map[spec.PolicyGroup][]spec.PolicyEntry{}
	var proxied uint64
	for e := range rows {
		if !e.Deleted {
			groups[e.group()] = append(groups[e.group()], o.withCookie(e))
			proxied = max(proxied, redirect(e))
		}
	}
	if err := o.gate.await(ctx, proxied); err != nil {
		return err
	}
	narrowed, err := m.SyncPolicy(groups)
	if len(narrowed) > 0 {
		o.markDirty(narrowed...)
	}
	return err
}
