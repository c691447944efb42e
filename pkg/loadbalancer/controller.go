package loadbalancer

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/desired"
)

// controller keeps the tables in step with the Intake: a changed Service
// rewrites its own frontends, and only the frontends and backends whose
// content changed are written, so that the reconcilers touch nothing
// else. A Service that does not fit in the service maps is refused
// alone, and who gets a frontend two Services claim is decided by the
// claims alone (see Owner), the same on every node. run is a
// desired.Controller's, whose goroutine alone touches the controller's
// state but for the followers and the pruned flags, which the
// reconcilers' side sets.
type controller struct {
	db     *statedb.DB
	tables Tables
	local  Local
	intake *Intake // nil: no services
	log    *slog.Logger
	events Events    // nil: warnings are only logged
	maps   MapSource // read by the first run alone

	// wake runs the controller for what the tables do not say: the
	// maps opened, a reconciler reached a revision awaited or pruned,
	// services wait to be tried again.
	wake *desired.Signal
	// touches follow the intake's tables, one per input.
	touches []touches
	// pending are the services the next pass writes: those whose
	// change no pass wrote yet (the maps were not open, the pass
	// failed), and refused ones that may fit now.
	pending map[ServiceName]bool
	// started: the first pass is done.
	started bool

	ids *ids
	// backendRefs counts the frontends each backend serves.
	backendRefs map[Addr]int
	claims      *claims
	room        room
	// frontendsDone and backendsDone follow the reconcilers, which
	// free what the tables drained; once both have pruned, what the maps
	// held at the start and no row took is gone too.
	frontendsDone, backendsDone     *progress
	frontendsPruned, backendsPruned atomic.Bool
	// refused are the services that did not fit; they are tried again
	// when room frees.
	refused map[ServiceName]refusal
	// lost are the frontends each service claims and does not get, with
	// why: a service is warned once about each.
	lost map[ServiceName]map[Addr]string
	// badAlgorithm are the services whose lb-algorithm annotation names
	// no algorithm, with what was said: a service is warned once.
	badAlgorithm map[ServiceName]string
	// initDone marks the tables initialized after the first full pass.
	initDone []func(statedb.WriteTxn)
}

// newController keeps the tables within the maps' sizes limit. It
// follows the intake's tables from now on: what changes before the
// first run is in that run.
func newController(db *statedb.DB, t Tables, local Local, intake *Intake, log *slog.Logger, limit usage) (*controller, error) {
	c := &controller{db: db, tables: t, local: local, intake: intake, log: log, wake: desired.NewSignal(),
		pending: map[ServiceName]bool{}, ids: newIDs(), backendRefs: map[Addr]int{}, claims: newClaims(),
		room: room{limit: limit}, frontendsDone: newProgress(nil), backendsDone: newProgress(nil),
		refused: map[ServiceName]refusal{}, lost: map[ServiceName]map[Addr]string{}, badAlgorithm: map[ServiceName]string{}}
	if intake != nil {
		for _, in := range intake.Inputs {
			tt, err := in.follow(db)
			if err != nil {
				return nil, err
			}
			c.touches = append(c.touches, tt)
		}
	}
	txn := db.WriteTxn(t.Services, t.Frontends, t.Backends)
	for _, tbl := range []interface {
		RegisterInitializer(statedb.WriteTxn, string) func(statedb.WriteTxn)
	}{t.Services, t.Frontends, t.Backends} {
		c.initDone = append(c.initDone, tbl.RegisterInitializer(txn, "loadbalancer"))
	}
	txn.Commit()
	return c, nil
}

// inputs are what the controller's run reads: the intake's tables, and
// its wake.
func (c *controller) inputs() []desired.Input {
	out := []desired.Input{c.wake.Input()}
	if c.intake != nil {
		for _, in := range c.intake.Inputs {
			out = append(out, in.input())
		}
	}
	return out
}

// run is the controller's run: the services that the tables' changes
// up to txn touch join the pending ones, which a pass writes. The first
// pass waits for the maps. A pass that leaves services pending (refused
// ones that fit now) runs the controller again.
func (c *controller) run(_ context.Context, txn statedb.ReadTxn) error {
	for _, tt := range c.touches {
		for _, n := range tt.next(txn) {
			c.pending[n] = true
		}
	}
	c.followZone(txn)
	var err error
	if c.started {
		// The reconcilers may have freed room that refused services
		// wait for.
		c.settle()
		if len(c.pending) > 0 {
			err = c.process(txn, c.takePending(), false)
		}
	} else {
		err = c.first(txn)
	}
	if err == nil && len(c.pending) > 0 {
		c.wake.Fire()
	}
	return err
}

// followZone reads the node's zone as of txn. When it changed after the
// first pass (which writes every service anyway), every service the
// tables hold, and every refused one, is pending: any may have endpoints
// hinted for the old zone or the new one.
func (c *controller) followZone(txn statedb.ReadTxn) {
	if c.intake == nil || c.intake.Zone == nil {
		return
	}
	z := c.intake.Zone(txn)
	if z == c.local.Zone {
		return
	}
	c.log.Info("Node zone changed: rewriting every service", "from", c.local.Zone, "to", z)
	c.local.Zone = z
	if !c.started {
		return
	}
	for r := range c.tables.Services.All(txn) {
		c.pending[r.Name] = true
	}
	for n := range c.refused {
		c.pending[n] = true
	}
}

// takePending returns the pending services and forgets them.
func (c *controller) takePending() []ServiceName {
	out := make([]ServiceName, 0, len(c.pending))
	for n := range c.pending {
		out = append(out, n)
	}
	clear(c.pending)
	return out
}

// first is the first pass, once the maps are open: after a restart, the
// numbers the datapath holds are taken over; then every service pending
// (all of them, as the first changes are every row) is written, and the
// tables are marked initialized so that the reconcilers prune what is
// left.
func (c *controller) first(txn statedb.ReadTxn) error {
	m := c.maps()
	if m == nil {
		return errNoMap
	}
	err := c.ids.restore(m)
	if err == nil {
		err = c.room.restore(m)
	}
	if err != nil {
		return fmt.Errorf("read the service maps: %w", err)
	}
	if err := c.process(txn, c.takePending(), true); err != nil {
		return err
	}
	c.started = true
	return nil
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
// back, and its services are pending again.
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
		c.pending[pl.name] = true
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
		c.room.used.ranges += rangeEntries(r.Frontend)
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

// retryRefused makes pending the refused services that the room free now
// may fit (all of them with all): trying a large one again costs.
func (c *controller) retryRefused(all bool) {
	for n, r := range c.refused {
		if why, _ := c.room.fit(r.need); all || why == "" {
			c.pending[n] = true
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
