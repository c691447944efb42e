package loadbalancer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cilium/statedb"
)

// controller keeps the tables in step with the Intake: a changed Service
// rewrites its own frontends, and only the frontends and backends whose
// content changed are written, so that the reconcilers touch nothing
// else. A Service that does not fit in the service maps is refused
// alone, and who gets a frontend two Services claim is decided by the
// claims alone (see Owner), the same on every node.
type controller struct {
	db     *statedb.DB
	tables Tables
	local  Local
	intake *Intake // nil: no services
	log    *slog.Logger
	events Events // nil: warnings are only logged

	// dirty are the services to try again: those of a pass that
	// failed, and refused ones that may fit now.
	mu    sync.Mutex
	dirty map[ServiceName]bool
	wake  chan struct{}

	// Owned by the job's goroutine.

	// touches follow the intake's tables, one per input.
	touches []touches
	ids     *ids
	// backendRefs counts the frontends each backend serves.
	backendRefs map[Addr]int
	claims      *claims
	room        room
	// frontendsDone and backendsDone follow the reconcilers, which
	// free what the tables drained; once both have pruned, what the maps
	// held at the start and no row took is gone too.
	frontendsDone, backendsDone     *follower
	frontendsPruned, backendsPruned atomic.Bool
	// refused are the services that did not fit; they are tried again
	// when room frees.
	refused map[ServiceName]refusal
	// lost are the frontends each service claims and does not get, with
	// why: a service is warned once about each.
	lost map[ServiceName]map[Addr]string
	// initDone marks the tables initialized after the first full pass.
	initDone []func(statedb.WriteTxn)
}

// newController keeps the tables within the maps' sizes limit.
func newController(db *statedb.DB, t Tables, local Local, intake *Intake, log *slog.Logger, limit usage) *controller {
	c := &controller{db: db, tables: t, local: local, intake: intake, log: log, dirty: map[ServiceName]bool{},
		wake: make(chan struct{}, 1), ids: newIDs(), backendRefs: map[Addr]int{}, claims: newClaims(),
		room: room{limit: limit}, frontendsDone: newFollower(nil), backendsDone: newFollower(nil),
		refused: map[ServiceName]refusal{}, lost: map[ServiceName]map[Addr]string{}}
	txn := db.WriteTxn(t.Services, t.Frontends, t.Backends)
	for _, tbl := range []interface {
		RegisterInitializer(statedb.WriteTxn, string) func(statedb.WriteTxn)
	}{t.Services, t.Frontends, t.Backends} {
		c.initDone = append(c.initDone, tbl.RegisterInitializer(txn, "loadbalancer"))
	}
	txn.Commit()
	return c
}

// markDirty queues a service for the next pass.
func (c *controller) markDirty(n ServiceName) {
	c.mu.Lock()
	c.dirty[n] = true
	c.mu.Unlock()
	c.trigger()
}

// trigger wakes the job for a pass.
func (c *controller) trigger() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// follow waits until the intake's tables are initialized (a first pass
// over half the cluster would let the reconcilers prune what the rest
// still needs), then starts following their changes, before anything
// is read of them, so that no change falls between.
func (c *controller) follow(ctx context.Context) error {
	if c.intake == nil {
		return nil
	}
	metas := make([]statedb.TableMeta, 0, len(c.intake.Inputs))
	for _, in := range c.intake.Inputs {
		_, initialized := in.table().Initialized(c.db.ReadTxn())
		select {
		case <-initialized:
		case <-ctx.Done():
			return fmt.Errorf("table %s not initialized: %w", in.table().Name(), ctx.Err())
		}
		metas = append(metas, in.table())
	}
	if len(metas) == 0 {
		return nil
	}
	txn := c.db.WriteTxn(metas...)
	defer txn.Abort()
	for _, in := range c.intake.Inputs {
		t, err := in.follow(txn)
		if err != nil {
			return err
		}
		c.touches = append(c.touches, t)
	}
	txn.Commit()
	return nil
}

// changed are the services that the tables' changes up to txn touch,
// and those to try again; ws gets the channels of the next changes.
func (c *controller) changed(txn statedb.ReadTxn, ws *statedb.WatchSet) []ServiceName {
	seen := map[ServiceName]bool{}
	var out []ServiceName
	add := func(ns []ServiceName) {
		for _, n := range ns {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	for _, t := range c.touches {
		ns, watch := t.next(txn)
		add(ns)
		ws.Add(watch)
	}
	add(c.takeDirty())
	return out
}

func (c *controller) takeDirty() []ServiceName {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ServiceName, 0, len(c.dirty))
	for n := range c.dirty {
		out = append(out, n)
	}
	clear(c.dirty)
	return out
}

// first is the first pass: after a restart, the numbers the datapath
// holds are taken over; then every service named (all of them, as the
// first changes are every row) is written, and the tables are marked
// initialized so that the reconcilers prune what is left. A pass that
// fails leaves its names to try again.
func (c *controller) first(m Map, txn statedb.ReadTxn, names []ServiceName) error {
	err := c.ids.restore(m)
	if err == nil {
		err = c.room.restore(m)
	}
	if err != nil {
		for _, n := range names {
			c.markDirty(n)
		}
		return fmt.Errorf("read the service maps: %w", err)
	}
	return c.process(txn, names, true)
}

// dropLeftovers frees, once both reconcilers have pruned the maps, what
// the maps held at the start and no row took: its room, and the numbers
// restored for it.
func (c *controller) dropLeftovers() bool {
	if c.room.left == nil || !c.frontendsPruned.Load() || !c.backendsPruned.Load() {
		return false
	}
	c.room.left = nil
	for a := range c.ids.backends.byAddr {
		if c.backendRefs[a] == 0 {
			c.ids.backends.release(a)
		}
	}
	txn := c.db.ReadTxn()
	for a := range c.ids.revNATs.byAddr {
		if _, _, ok := c.tables.Frontends.Get(txn, FrontendAddrIndex.Query(a)); !ok {
			c.ids.revNATs.release(a)
		}
	}
	return true
}

// pass is what one pass changes besides the tables.
type pass struct {
	// numbered are the addresses that got a number in the pass, which
	// an aborted pass gives back.
	numberedFrontends, numberedBackends []Addr
	// drained is what the pass's deletions free once reconciled.
	frontends, backends drain
	// left is the room's leftovers before the pass.
	left *leftovers
}

// process rewrites the named services, as txn holds them, and those that
// gain or lose a frontend by their change, in one transaction. A service
// that does not fit is refused alone: nothing of it is written (what it
// had stays), and the others are written as usual.
func (c *controller) process(txn statedb.ReadTxn, names []ServiceName, initialize bool) error {
	c.settle()
	plans := c.plan(txn, names)
	wtxn := c.db.WriteTxn(c.tables.Services, c.tables.Frontends, c.tables.Backends)
	defer wtxn.Abort()
	p := &pass{left: c.room.left.clone()}
	later := map[ServiceName]bool{}
	for _, pl := range plans {
		later[pl.name] = true
	}
	for _, pl := range plans {
		delete(later, pl.name)
		if err := c.apply(wtxn, pl, later, p); err != nil {
			return c.abort(wtxn, plans, p, err)
		}
	}
	for _, pl := range plans {
		if pl.refused == "" {
			if err := c.remove(wtxn, pl, p); err != nil {
				return c.abort(wtxn, plans, p, err)
			}
		}
	}
	if initialize {
		for _, done := range c.initDone {
			done(wtxn)
		}
	}
	rtxn := wtxn.Commit()
	if p.frontends.room != (usage{}) || len(p.frontends.addrs) > 0 {
		p.frontends.rev = c.tables.Frontends.Revision(rtxn)
		c.room.frontends = append(c.room.frontends, p.frontends)
		c.frontendsDone.await(p.frontends.rev)
	}
	if p.backends.room != (usage{}) || len(p.backends.addrs) > 0 {
		p.backends.rev = c.tables.Backends.Revision(rtxn)
		c.room.backends = append(c.room.backends, p.backends)
		c.backendsDone.await(p.backends.rev)
	}
	c.report(plans)
	c.settle()
	return nil
}

// abort drops the pass: nothing of the transaction lands, the counts
// are what the tables say again, the numbers the pass handed out go
// back, and its services are tried again.
func (c *controller) abort(txn statedb.WriteTxn, plans []*plan, p *pass, err error) error {
	txn.Abort()
	c.recount()
	c.room.left = p.left
	rtxn := c.db.ReadTxn()
	for _, a := range p.numberedFrontends {
		if _, _, ok := c.tables.Frontends.Get(rtxn, FrontendAddrIndex.Query(a)); !ok {
			c.ids.revNATs.release(a)
		}
	}
	for _, a := range p.numberedBackends {
		if c.backendRefs[a] == 0 {
			c.ids.backends.release(a)
		}
	}
	for _, pl := range plans {
		c.markDirty(pl.name)
	}
	return err
}

// recount makes backendRefs and the room used what the tables say.
func (c *controller) recount() {
	clear(c.backendRefs)
	c.room.used = usage{}
	txn := c.db.ReadTxn()
	for r := range c.tables.Frontends.All(txn) {
		for _, b := range r.Backends {
			c.backendRefs[b.Addr]++
		}
		c.room.used.services += serviceEntries(r.Frontend)
		c.room.used.revNATs++
	}
	c.room.used.backends = c.tables.Backends.NumObjects(txn)
}

// settle frees what the reconcilers have removed from the kernel: its
// room, and the numbers of addresses no row took again meanwhile.
func (c *controller) settle() {
	fronts, backs, any := c.room.settled(c.frontendsDone.reached(), c.backendsDone.reached())
	dropped := c.dropLeftovers()
	if !any && !dropped {
		return
	}
	txn := c.db.ReadTxn()
	for _, a := range fronts {
		if _, _, ok := c.tables.Frontends.Get(txn, FrontendAddrIndex.Query(a)); !ok {
			c.ids.revNATs.release(a)
		}
	}
	for _, a := range backs {
		if c.backendRefs[a] == 0 {
			c.ids.backends.release(a)
		}
	}
	// Numbers freed may be what a service lacked: those that ran out
	// of them are tried again too.
	c.retryRefused(dropped)
}

// refusal is why a service was refused.
type refusal struct {
	// key says what it asked for, which it is warned about once.
	key string
	// need is the room it lacked; none when numbers ran out.
	need usage
}

// retryRefused queues the refused services that the room free now may
// fit (all of them with all): trying a large one again costs.
func (c *controller) retryRefused(all bool) {
	for n, r := range c.refused {
		if why, _ := c.room.fit(r.need); all || why == "" {
			c.markDirty(n)
		}
	}
}

func cmpNames(a, b ServiceName) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
