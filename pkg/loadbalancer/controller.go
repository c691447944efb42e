package loadbalancer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Source gives the load balancer the cluster's Services; the Kubernetes
// side implements it from Services and EndpointSlices, and presents this
// node's pods that map hostPorts as services of type HostPort.
type Source interface {
	// Start begins watching and returns once the source holds the
	// cluster (every Service and EndpointSlice listed).
	Start(ctx context.Context) error
	// OnChange calls fn with the name of each Service whose object or
	// endpoints changed. fn must not block.
	OnChange(fn func(ServiceName))
	// Service returns a Service and its endpoints; false once it is gone.
	Service(ServiceName) (Service, []Endpoint, bool)
	// Services names every Service.
	Services() []ServiceName
	// NodeName is this node's name, which endpoints name their node by.
	NodeName() string
}

// controller keeps the tables in step with the Source: a changed Service
// rewrites its own frontends, and only the frontends and backends whose
// content changed are written, so that the reconcilers touch nothing
// else.
type controller struct {
	db     *statedb.DB
	tables Tables
	local  Local
	source Source
	log    *slog.Logger

	mu    sync.Mutex
	dirty map[ServiceName]bool

	// Owned by the job's goroutine.
	ids *ids
	// backendRefs counts the frontends each backend serves.
	backendRefs map[Addr]int
	// contenders are the services that want a frontend another service
	// holds; they are processed again when it is released.
	contenders map[Addr]map[ServiceName]bool
	// initDone marks the tables initialized after the first full pass.
	initDone []func(statedb.WriteTxn)
}

func newController(db *statedb.DB, t Tables, local Local, source Source, log *slog.Logger) *controller {
	c := &controller{db: db, tables: t, local: local, source: source, log: log, dirty: map[ServiceName]bool{},
		ids: newIDs(), backendRefs: map[Addr]int{}, contenders: map[Addr]map[ServiceName]bool{}}
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
}

func (c *controller) hasDirty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dirty) > 0
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
// holds are taken over; then every Service is written, and the tables
// are marked initialized so that the reconcilers prune what is left.
func (c *controller) first(m Map) error {
	if err := c.ids.restore(m); err != nil {
		return fmt.Errorf("read the service maps: %w", err)
	}
	var names []ServiceName
	if c.source != nil {
		names = c.source.Services()
		c.takeDirty() // all of them are in names
	}
	if err := c.process(names, true); err != nil {
		return err
	}
	// Numbers restored for what no row wants any more are free again.
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
	return nil
}

// process rewrites the named services in one transaction.
func (c *controller) process(names []ServiceName, initialize bool) error {
	slices.SortFunc(names, func(a, b ServiceName) int { return cmpNames(a, b) })
	txn := c.db.WriteTxn(c.tables.Services, c.tables.Frontends, c.tables.Backends)
	defer txn.Abort()
	for _, n := range names {
		if err := c.processOne(txn, n); err != nil {
			// Nothing of the transaction lands: count the backends
			// of what the table holds again.
			txn.Abort()
			c.recount()
			return err
		}
	}
	if initialize {
		for _, done := range c.initDone {
			done(txn)
		}
	}
	txn.Commit()
	return nil
}

// recount makes backendRefs what the frontends table says.
func (c *controller) recount() {
	clear(c.backendRefs)
	for r := range c.tables.Frontends.All(c.db.ReadTxn()) {
		for _, b := range r.Backends {
			c.backendRefs[b.Addr]++
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

func (c *controller) processOne(txn statedb.WriteTxn, n ServiceName) error {
	var want []Frontend
	svc, eps, ok := Service{}, []Endpoint(nil), false
	if c.source != nil {
		svc, eps, ok = c.source.Service(n)
	}
	if ok {
		row := &ServiceRow{Service: svc, LocalReady: LocalReady(svc, eps, c.local.NodeName)}
		if _, _, err := c.tables.Services.Insert(txn, row); err != nil {
			return err
		}
		want = Frontends(svc, eps, c.local)
	} else if _, _, err := c.tables.Services.Delete(txn, &ServiceRow{Service: Service{Name: n}}); err != nil {
		return err
	}

	wanted := map[Addr]bool{}
	for _, f := range want {
		wanted[f.Addr] = true
		cur, _, held := c.tables.Frontends.Get(txn, FrontendAddrIndex.Query(f.Addr))
		if held && cur.Service != n {
			// Another service holds the frontend: the first one keeps it.
			if c.contenders[f.Addr] == nil {
				c.contenders[f.Addr] = map[ServiceName]bool{}
			}
			if !c.contenders[f.Addr][n] {
				c.log.Warn("frontend already taken by another service", "frontend", f.Addr, "service", n, "holder", cur.Service)
			}
			c.contenders[f.Addr][n] = true
			continue
		}
		delete(c.contenders[f.Addr], n)
		row, err := c.row(f)
		if err != nil {
			return err
		}
		if held && cur.sameAs(row) {
			continue
		}
		if _, _, err := c.tables.Frontends.Insert(txn, row.WithStatus(reconciler.StatusPending())); err != nil {
			return err
		}
		if err := c.refBackends(txn, row.Backends, 1); err != nil {
			return err
		}
		if held {
			if err := c.refBackends(txn, cur.Backends, -1); err != nil {
				return err
			}
		}
	}
	// What the service no longer wants it no longer contends for.
	for a, cs := range c.contenders {
		if !wanted[a] {
			delete(cs, n)
		}
		if len(cs) == 0 {
			delete(c.contenders, a)
		}
	}
	var gone []*FrontendRow
	for r := range c.tables.Frontends.List(txn, FrontendServiceIndex.Query(n)) {
		if !wanted[r.Addr] {
			gone = append(gone, r)
		}
	}
	for _, r := range gone {
		if _, _, err := c.tables.Frontends.Delete(txn, r); err != nil {
			return err
		}
		c.ids.revNATs.release(r.Addr)
		if err := c.refBackends(txn, r.Backends, -1); err != nil {
			return err
		}
		// A service that wanted it may have it now.
		for other := range c.contenders[r.Addr] {
			c.markDirty(other)
		}
	}
	return nil
}

// row numbers a frontend's backends and its reverse translation.
func (c *controller) row(f Frontend) (*FrontendRow, error) {
	idx, err := c.ids.revNATs.get(f.Addr)
	if err != nil {
		return nil, err
	}
	r := &FrontendRow{Frontend: f, RevNATIndex: idx}
	for _, b := range f.Backends {
		id, err := c.ids.backends.get(b.Addr)
		if err != nil {
			return nil, err
		}
		r.BackendSpecs = append(r.BackendSpecs, spec.Backend{ID: id, Address: b.Address, Port: b.Port,
			Protocol: b.Protocol, Terminating: b.Terminating})
	}
	slot := func(bs []Backend) ([]spec.BackendID, error) {
		out := make([]spec.BackendID, 0, len(bs))
		for _, b := range bs {
			id, err := c.ids.backends.get(b.Addr)
			if err != nil {
				return nil, err
			}
			out = append(out, id)
		}
		return out, nil
	}
	if r.SlotIDs, err = slot(f.Slots); err != nil {
		return nil, err
	}
	if r.InternalSlotIDs, err = slot(f.InternalSlots); err != nil {
		return nil, err
	}
	return r, nil
}

// refBackends counts a frontend's backends in (delta 1) or out (-1): a
// backend no frontend serves leaves the table, a new or changed one goes
// in.
func (c *controller) refBackends(txn statedb.WriteTxn, bs []Backend, delta int) error {
	for _, b := range bs {
		c.backendRefs[b.Addr] += delta
		id, err := c.ids.backends.get(b.Addr)
		if err != nil {
			return err
		}
		row := &BackendRow{Backend: spec.Backend{ID: id, Address: b.Address, Port: b.Port, Protocol: b.Protocol,
			Terminating: b.Terminating}}
		if c.backendRefs[b.Addr] <= 0 {
			delete(c.backendRefs, b.Addr)
			if _, _, err := c.tables.Backends.Delete(txn, row); err != nil {
				return err
			}
			c.ids.backends.release(b.Addr)
			continue
		}
		if delta < 0 {
			continue
		}
		if cur, _, ok := c.tables.Backends.Get(txn, BackendIDIndex.Query(id)); ok && cur.Backend == row.Backend {
			continue
		}
		if _, _, err := c.tables.Backends.Insert(txn, row.WithStatus(reconciler.StatusPending())); err != nil {
			return err
		}
	}
	return nil
}
