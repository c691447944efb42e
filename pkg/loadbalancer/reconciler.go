package loadbalancer

import (
	"context"
	"errors"
	"iter"
	"net/netip"
	"slices"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/desired"
)

// Map is the datapath's service maps; *datapath.Maps is one.
type Map interface {
	UpsertService(spec.Service) error
	DeleteService(spec.Frontend) error
	Services() ([]spec.Service, error)
	UpsertBackend(spec.Backend) error
	DeleteBackend(spec.BackendID) error
	Backends() (map[spec.BackendID]spec.Backend, error)
	UpsertRevNAT(spec.RevNAT) error
	DeleteRevNAT(index uint16) error
	RevNATs() (map[uint16]spec.RevNAT, error)
	UpsertSourceRange(spec.SourceRange) error
	DeleteSourceRange(spec.SourceRange) error
	SourceRanges() ([]spec.SourceRange, error)
	// MaglevTableSize is the slots of the Maglev tables, which
	// UpsertService writes with the frontends that have LBMaglev.
	MaglevTableSize() int
	MaglevIndexes() ([]uint16, error)
	DeleteMaglev(index uint16) error
}

// Sockets ends the connected UDP sockets of the node's processes and
// pods that aim at a backend that is gone. Socket-level balancing chose
// their backend once, at connect: without this a DNS client would keep
// sending to a dead server. (TCP needs nothing: its connection fails and
// the next connect is balanced.)
type Sockets interface {
	TerminateUDP(backend netip.AddrPort) error
}

// MapSource returns the datapath's service maps, or nil while the
// datapath has not opened them yet.
type MapSource func() Map

var errNoMap = errors.New("service maps not open yet")

func mapOf(source MapSource) (Map, error) {
	if m := source(); m != nil {
		return m, nil
	}
	return nil, errNoMap
}

// registerReconcilers makes the service maps hold what the frontends and
// backends tables say. The pruned functions are called after each prune
// that left the maps holding what the tables say.
func registerReconcilers(p reconciler.Params, t Tables, source MapSource, sockets Sockets, maglevSeed uint64,
	frontendsPruned, backendsPruned func()) (reconciler.Reconciler[*FrontendRow], reconciler.Reconciler[*BackendRow], error) {
	fr, err := desired.Register(p, t.Frontends, frontendOps{source: source, pruned: frontendsPruned, ranges: &heldRanges{},
		maglevSeed: maglevSeed})
	if err != nil {
		return nil, nil, err
	}
	br, err := desired.Register(p, t.Backends, backendOps{source: source, sockets: sockets, pruned: backendsPruned})
	return fr, br, err
}

type frontendOps struct {
	source MapSource
	pruned func()
	// ranges are the source ranges the map holds, which only the
	// reconciler's goroutine touches.
	ranges *heldRanges
	// maglevSeed is the cluster's seed of the Maglev tables.
	maglevSeed uint64
}

// Update implements reconciler.Operations: the frontend's backends, its
// reverse translation, then its entries (the internal scope first, so
// that the external one never announces a scope that is not there). A
// fenced frontend's source ranges are written before its entries, and an
// unfenced one's removed after them: a client the frontend is to keep
// out never finds it open, not even while it is written.
func (o frontendOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *FrontendRow) error {
	m, err := mapOf(o.source)
	if err != nil {
		return err
	}
	if len(r.SourceRanges) > 0 {
		if err := o.ranges.write(m, r.RevNATIndex, r.SourceRanges); err != nil {
			return err
		}
	}
	if err := o.writeEntries(m, r); err != nil {
		return err
	}
	if len(r.SourceRanges) == 0 {
		return o.ranges.write(m, r.RevNATIndex, nil)
	}
	return nil
}

func (o frontendOps) writeEntries(m Map, r *FrontendRow) error {
	for _, b := range r.BackendSpecs {
		if err := m.UpsertBackend(b); err != nil {
			return err
		}
	}
	if err := m.UpsertRevNAT(spec.RevNAT{Index: r.RevNATIndex, Address: r.Address, Port: r.Port}); err != nil {
		return err
	}
	svcs := r.Services()
	for _, s := range svcs {
		if s.Flags&spec.LBMaglev != 0 {
			s.Maglev = MaglevTable(r.backendsOf(s.Backends), m.MaglevTableSize(), o.maglevSeed)
		}
		if err := m.UpsertService(s); err != nil {
			return err
		}
	}
	if len(svcs) == 1 {
		// One scope now: an internal scope of before goes.
		f := svcs[0].Frontend
		f.Scope = spec.ScopeInternal
		return m.DeleteService(f)
	}
	return nil
}

// Delete implements reconciler.Operations.
func (o frontendOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *FrontendRow) error {
	m, err := mapOf(o.source)
	if err != nil {
		return err
	}
	f := spec.Frontend{Address: r.Address, Port: r.Port, Protocol: r.Protocol}
	errs := []error{m.DeleteService(f)}
	f.Scope = spec.ScopeInternal
	errs = append(errs, m.DeleteService(f))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Its ranges go once nothing looks them up.
	return errors.Join(o.ranges.write(m, r.RevNATIndex, nil), m.DeleteRevNAT(r.RevNATIndex))
}

// Prune implements reconciler.Operations: frontends and reverse
// translations no row names go, and every row is written again.
func (o frontendOps) Prune(ctx context.Context, txn statedb.ReadTxn, rows iter.Seq2[*FrontendRow, statedb.Revision]) error {
	m, err := mapOf(o.source)
	if err != nil {
		return err
	}
	held, err := m.Services()
	if err != nil {
		return err
	}
	revs, err := m.RevNATs()
	if err != nil {
		return err
	}
	// The ranges are read again: a failed write may have left the map
	// otherwise than remembered.
	o.ranges.forget()
	var errs []error
	wantFrontends := map[spec.Frontend]bool{}
	wantRevs, wantTables := map[uint16]bool{}, map[uint16]bool{}
	for r := range rows {
		for _, s := range r.Services() {
			wantFrontends[s.Frontend] = true
		}
		wantRevs[r.RevNATIndex] = true
		wantTables[r.RevNATIndex] = r.Flags&spec.LBMaglev != 0
		errs = append(errs, o.Update(ctx, txn, 0, r))
	}
	for _, s := range held {
		if !wantFrontends[s.Frontend] {
			errs = append(errs, m.DeleteService(s.Frontend))
		}
	}
	for idx := range revs {
		if !wantRevs[idx] {
			errs = append(errs, m.DeleteRevNAT(idx))
		}
	}
	// Tables no frontend names (a delete that failed half way).
	tables, err := m.MaglevIndexes()
	errs = append(errs, err)
	for _, idx := range tables {
		if !wantTables[idx] {
			errs = append(errs, m.DeleteMaglev(idx))
		}
	}
	// Ranges of indexes no row has, after the entries that named them.
	errs = append(errs, o.ranges.prune(m, wantRevs))
	return pruned(errors.Join(errs...), o.pruned)
}

// heldRanges are the source ranges the map holds, by reverse NAT index,
// so that a frontend's write removes those it no longer has without
// reading the whole map. Read from the map at the first use, and again
// after a failed write: after a restart it holds the previous run's.
type heldRanges struct {
	byIndex map[uint16][]netip.Prefix // nil: not read yet
}

func (h *heldRanges) forget() { h.byIndex = nil }

func (h *heldRanges) load(m Map) error {
	if h.byIndex != nil {
		return nil
	}
	rs, err := m.SourceRanges()
	if err != nil {
		return err
	}
	h.byIndex = map[uint16][]netip.Prefix{}
	for _, r := range rs {
		h.byIndex[r.RevNATIndex] = append(h.byIndex[r.RevNATIndex], r.Prefix)
	}
	return nil
}

// write makes the map hold want as idx's ranges: those that go are
// removed before those that come are added, so that meanwhile the
// frontend admits fewer clients, never more.
func (h *heldRanges) write(m Map, idx uint16, want []netip.Prefix) (err error) {
	if err := h.load(m); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			h.forget()
		}
	}()
	have := h.byIndex[idx]
	for _, p := range have {
		if !slices.Contains(want, p) {
			if err := m.DeleteSourceRange(spec.SourceRange{RevNATIndex: idx, Prefix: p}); err != nil {
				return err
			}
		}
	}
	for _, p := range want {
		if !slices.Contains(have, p) {
			if err := m.UpsertSourceRange(spec.SourceRange{RevNATIndex: idx, Prefix: p}); err != nil {
				return err
			}
		}
	}
	if len(want) == 0 {
		delete(h.byIndex, idx)
	} else {
		h.byIndex[idx] = slices.Clone(want)
	}
	return nil
}

// prune removes the ranges of the indexes that are not wanted.
func (h *heldRanges) prune(m Map, want map[uint16]bool) error {
	if err := h.load(m); err != nil {
		return err
	}
	var errs []error
	for idx := range h.byIndex {
		if !want[idx] {
			errs = append(errs, h.write(m, idx, nil))
		}
	}
	return errors.Join(errs...)
}

// pruned calls fn after a prune that succeeded.
func pruned(err error, fn func()) error {
	if err == nil && fn != nil {
		fn()
	}
	return err
}

type backendOps struct {
	source  MapSource
	sockets Sockets // nil: no socket-level balancing
	pruned  func()
}

// Update implements reconciler.Operations.
func (o backendOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *BackendRow) error {
	m, err := mapOf(o.source)
	if err != nil {
		return err
	}
	return m.UpsertBackend(r.Backend)
}

// Delete implements reconciler.Operations: the backend leaves the map,
// then the UDP sockets connected to it end.
func (o backendOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *BackendRow) error {
	m, err := mapOf(o.source)
	if err != nil {
		return err
	}
	if err := m.DeleteBackend(r.ID); err != nil {
		return err
	}
	if o.sockets != nil && r.Protocol == spec.ProtoUDP {
		return o.sockets.TerminateUDP(netip.AddrPortFrom(r.Address, r.Port))
	}
	return nil
}

// Prune implements reconciler.Operations: backends no row names go.
func (o backendOps) Prune(_ context.Context, _ statedb.ReadTxn, rows iter.Seq2[*BackendRow, statedb.Revision]) error {
	m, err := mapOf(o.source)
	if err != nil {
		return err
	}
	held, err := m.Backends()
	if err != nil {
		return err
	}
	var errs []error
	want := map[spec.BackendID]bool{}
	for r := range rows {
		want[r.ID] = true
		if held[r.ID] != r.Backend {
			errs = append(errs, m.UpsertBackend(r.Backend))
		}
	}
	for id := range held {
		if !want[id] {
			errs = append(errs, m.DeleteBackend(id))
		}
	}
	return pruned(errors.Join(errs...), o.pruned)
}
