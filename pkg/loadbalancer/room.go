package loadbalancer

import (
	"fmt"
	"maps"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// usage counts entries of the three service maps.
type usage struct {
	// services are cilium_lb4_services entries: one per frontend and
	// scope, one per slot.
	services int
	backends int
	revNATs  int
	// ranges are cilium_lb4_source_range entries: a fenced frontend's
	// prefixes.
	ranges int
}

func (u usage) add(o usage) usage {
	return usage{services: u.services + o.services, backends: u.backends + o.backends, revNATs: u.revNATs + o.revNATs,
		ranges: u.ranges + o.ranges}
}

// limitsOf are the maps' sizes for --bpf-lb-map-max: reverse NAT
// indexes are 16 bits, 0 unused, so that map never holds more than 65535.
func limitsOf(mapMax int) usage {
	return usage{services: mapMax, backends: mapMax, revNATs: min(mapMax, 0xffff), ranges: mapMax}
}

// rangeShare is the part of the source range map one Service may hold at
// most (1/rangeShare): whoever may write a Service may write thousands of
// loadBalancerSourceRanges, and the map is every Service's.
const rangeShare = 16

// rangeEntries are the cilium_lb4_source_range entries of a frontend.
func rangeEntries(f Frontend) int { return len(f.SourceRanges) }

// serviceEntries are the cilium_lb4_services entries of a frontend.
func serviceEntries(f Frontend) int {
	n := 1 + len(f.Slots)
	if f.Flags&spec.LBTwoScopes != 0 {
		n += 1 + len(f.InternalSlots)
	}
	return n
}

// room counts what the service maps hold, so that a service is written
// only when all of it fits: a map that fills half-way would leave a
// service half-written, and a later one that does not fit would keep
// failing. What the tables no longer want still takes room until the
// reconcilers have removed it from the kernel: a frontend's new backends
// may reach the backends map before another's old ones leave it, and a
// deletion that failed stays until it is retried.
type room struct {
	limit usage
	// used is what the tables' rows take.
	used usage
	// draining is what rows let go of and the kernel may still hold,
	// by the revision of the table whose reconciler removes it.
	frontends, backends []drain
	// left is what the maps held at the start; nil once pruned.
	left *leftovers
}

// leftovers is what the maps held when the agent started and no row has
// written again: the previous run's, which the reconcilers' first prune
// removes. Until then it takes room. A row written at a frontend, or
// with a backend id or reverse NAT index, that the maps hold takes its
// entries over.
type leftovers struct {
	services map[Addr]int // entries, by frontend
	revNATs  map[uint16]bool
	backends map[spec.BackendID]bool
	entries  int // services' sum
	// ranges are the source range entries by reverse NAT index, and
	// rangeEntries their sum.
	ranges       map[uint16]int
	rangeEntries int
}

// restore counts what the maps hold.
func (r *room) restore(m Map) error {
	l := &leftovers{services: map[Addr]int{}, revNATs: map[uint16]bool{}, backends: map[spec.BackendID]bool{},
		ranges: map[uint16]int{}}
	svcs, err := m.Services()
	if err != nil {
		return err
	}
	for _, s := range svcs {
		a := Addr{Address: s.Frontend.Address, Port: s.Frontend.Port, Protocol: s.Frontend.Protocol}
		l.services[a] += 1 + len(s.Backends)
		l.entries += 1 + len(s.Backends)
	}
	revs, err := m.RevNATs()
	if err != nil {
		return err
	}
	for idx := range revs {
		l.revNATs[idx] = true
	}
	backends, err := m.Backends()
	if err != nil {
		return err
	}
	for id := range backends {
		l.backends[id] = true
	}
	ranges, err := m.SourceRanges()
	if err != nil {
		return err
	}
	for _, sr := range ranges {
		l.ranges[sr.RevNATIndex]++
		l.rangeEntries++
	}
	r.left = l
	return nil
}

// entriesAt is what the maps hold for frontend a before a row takes it.
func (l *leftovers) entriesAt(a Addr) int {
	if l == nil {
		return 0
	}
	return l.services[a]
}

// rangesAt is what the maps hold as the source ranges of reverse NAT
// index idx before a row takes it.
func (l *leftovers) rangesAt(idx uint16, ok bool) int {
	if l == nil || !ok {
		return 0
	}
	return l.ranges[idx]
}

// takeRanges hands the source ranges of idx over to a new row of n; it
// returns the entries beyond those, which the row's write removes.
func (l *leftovers) takeRanges(idx uint16, n int) (extra int) {
	if l == nil {
		return 0
	}
	held, ok := l.ranges[idx]
	if !ok {
		return 0
	}
	delete(l.ranges, idx)
	l.rangeEntries -= held
	return max(0, held-n)
}

func (l *leftovers) hasRevNAT(idx uint16, ok bool) bool { return l != nil && ok && l.revNATs[idx] }

func (l *leftovers) hasBackend(id spec.BackendID, ok bool) bool {
	return l != nil && ok && l.backends[id]
}

// takeFrontend hands frontend a's entries and reverse NAT index over to
// a new row of entries entries; it returns the entries beyond those,
// which the row's write removes.
func (l *leftovers) takeFrontend(a Addr, idx uint16, entries int) (extra int) {
	if l == nil {
		return 0
	}
	delete(l.revNATs, idx)
	n, ok := l.services[a]
	if !ok {
		return 0
	}
	delete(l.services, a)
	l.entries -= n
	return max(0, n-entries)
}

func (l *leftovers) takeBackend(id spec.BackendID) {
	if l != nil {
		delete(l.backends, id)
	}
}

func (l *leftovers) clone() *leftovers {
	if l == nil {
		return nil
	}
	return &leftovers{services: maps.Clone(l.services), revNATs: maps.Clone(l.revNATs), backends: maps.Clone(l.backends),
		entries: l.entries, ranges: maps.Clone(l.ranges), rangeEntries: l.rangeEntries}
}

func (l *leftovers) usage() usage {
	if l == nil {
		return usage{}
	}
	return usage{services: l.entries, revNATs: len(l.revNATs), backends: len(l.backends), ranges: l.rangeEntries}
}

// drain is room, and the numbers of the addresses, that a committed pass
// let go of: free once the table's reconciler has passed rev.
type drain struct {
	rev   statedb.Revision
	room  usage
	addrs []Addr
}

func (r *room) draining() usage {
	u := r.left.usage()
	for _, d := range r.frontends {
		u = u.add(d.room)
	}
	for _, d := range r.backends {
		u = u.add(d.room)
	}
	return u
}

// fit says why a change of more does not fit beside what the maps hold,
// and the part of that which depends on the change alone; "" when it
// fits. A change that shrinks what a map holds always fits.
func (r *room) fit(more usage) (why, key string) {
	held := r.used.add(r.draining())
	for _, m := range []struct {
		name             string
		held, more, room int
	}{
		{"cilium_lb4_services entries", held.services, more.services, r.limit.services},
		{"backends", held.backends, more.backends, r.limit.backends},
		{"reverse NAT indexes", held.revNATs, more.revNATs, r.limit.revNATs},
		{"source range entries", held.ranges, more.ranges, r.limit.ranges},
	} {
		if m.more > 0 && m.held+m.more > m.room {
			key = fmt.Sprintf("needs %d more %s", m.more, m.name)
			return fmt.Sprintf("%s, %d of %d are free", key, max(0, m.room-m.held), m.room), key
		}
	}
	return "", ""
}

// settled takes out the drains their reconcilers have passed and returns
// the addresses whose numbers they held.
func (r *room) settled(frontends, backends statedb.Revision) (freedFrontends, freedBackends []Addr, any bool) {
	take := func(ds []drain, rev statedb.Revision) ([]drain, []Addr) {
		var addrs []Addr
		i := 0
		for ; i < len(ds) && ds[i].rev <= rev; i++ {
			addrs = append(addrs, ds[i].addrs...)
			any = true
		}
		return ds[i:], addrs
	}
	r.frontends, freedFrontends = take(r.frontends, frontends)
	r.backends, freedBackends = take(r.backends, backends)
	return freedFrontends, freedBackends, any
}
