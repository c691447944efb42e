package loadbalancer

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// plan is what a pass does with one service.
type plan struct {
	name   ServiceName
	svc    Service
	eps    []Endpoint
	exists bool
	want   []Frontend
	// owned are the frontends of want that the service gets.
	owned map[Addr]bool
	// lost are those another service gets, with why.
	lost map[Addr]string
	// refused says why the service does not fit; "" when it does.
	refused string
	refusal refusal
}

// plan reads the named services as of txn and records their claims; the
// services that gain or lose a frontend by them join the pass, in name
// order.
func (c *controller) plan(txn statedb.ReadTxn, names []ServiceName) []*plan {
	byName := map[ServiceName]*plan{}
	queue := slices.Clone(names)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if byName[n] != nil {
			continue
		}
		p := &plan{name: n, svc: Service{Name: n}}
		if c.intake != nil {
			p.svc, p.eps, p.exists = c.intake.Service(txn, n)
			if p.exists {
				p.want = Frontends(p.svc, p.eps, c.local)
			}
		}
		p.svc.Name = n
		var ips []netip.Addr
		if p.exists {
			ips = p.svc.ClusterIPs
		}
		byName[n] = p
		queue = append(queue, c.claims.set(p.svc, p.want, ips)...)
	}
	out := make([]*plan, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *plan) int { return cmpNames(a.name, b.name) })
	return out
}

// apply writes one service's part of a pass: the rows it no longer gets
// go, then those it gets are written, unless the outcome does not fit
// (p.refused says why). later are the services the pass comes to after
// it, which take the rows they get over in place.
func (c *controller) apply(txn statedb.WriteTxn, p *plan, later map[ServiceName]bool, ps *pass) error {
	p.owned, p.lost = map[Addr]bool{}, map[Addr]string{}
	var owned []Frontend
	for _, f := range p.want {
		if why := c.loses(p.name, f.Addr); why != "" {
			p.lost[f.Addr] = why
			continue
		}
		p.owned[f.Addr] = true
		owned = append(owned, f)
	}
	var drop []*FrontendRow
	for r := range c.tables.Frontends.List(txn, FrontendServiceIndex.Query(p.name)) {
		if o, ok := c.claims.owner(r.Addr); !p.owned[r.Addr] && (!ok || !later[o.Service]) {
			drop = append(drop, r)
		}
	}
	if p.exists {
		d := c.delta(txn, owned, drop)
		if why, key := c.rangesFit(owned); why != "" {
			p.refused, p.refusal = why, refusal{key: key}
			return nil
		}
		if why, key := c.room.fit(d); why != "" {
			p.refused, p.refusal = why, refusal{key: key, need: d}
			return nil
		}
	}
	rows, err := c.rows(owned, ps)
	if err != nil {
		p.refused, p.refusal = err.Error(), refusal{key: err.Error()}
		return nil
	}
	if p.exists {
		row := &ServiceRow{Service: p.svc, LocalReady: LocalReady(p.svc, p.eps, c.local.NodeName),
			ReadyNodes: ReadyNodes(p.svc, p.eps)}
		if _, _, err := c.tables.Services.Insert(txn, row); err != nil {
			return err
		}
	} else if _, _, err := c.tables.Services.Delete(txn, &ServiceRow{Service: p.svc}); err != nil {
		return err
	}
	for _, r := range drop {
		if err := c.drop(txn, r, ps); err != nil {
			return err
		}
	}
	// The reconciler writes rows in the order they are written here:
	// shrinking ones first, so that the map never holds more than before
	// the pass or after it.
	growth := make(map[*FrontendRow]int, len(rows))
	for _, r := range rows {
		old := c.room.left.entriesAt(r.Addr)
		if cur, _, held := c.tables.Frontends.Get(txn, FrontendAddrIndex.Query(r.Addr)); held {
			old = serviceEntries(cur.Frontend)
		}
		growth[r] = serviceEntries(r.Frontend) - old
	}
	slices.SortStableFunc(rows, func(a, b *FrontendRow) int { return growth[a] - growth[b] })
	for _, r := range rows {
		if err := c.put(txn, r, ps); err != nil {
			return err
		}
	}
	return nil
}

// put writes a row unless it wants what the table holds, and counts the
// room it takes and frees.
func (c *controller) put(txn statedb.WriteTxn, r *FrontendRow, ps *pass) error {
	cur, _, held := c.tables.Frontends.Get(txn, FrontendAddrIndex.Query(r.Addr))
	if held && cur.sameAs(r) {
		return nil
	}
	if _, _, err := c.tables.Frontends.Insert(txn, r.WithStatus(reconciler.StatusPending())); err != nil {
		return err
	}
	entries, ranges := serviceEntries(r.Frontend), rangeEntries(r.Frontend)
	c.room.used.services += entries
	c.room.used.ranges += ranges
	if !held {
		c.room.used.revNATs++
		ps.frontends.room.services += c.room.left.takeFrontend(r.Addr, r.RevNATIndex, entries)
		ps.frontends.room.ranges += c.room.left.takeRanges(r.RevNATIndex, ranges)
		return c.refBackends(txn, r.Backends, 1, ps)
	}
	// The entries the row no longer has leave the map when the reconciler
	// rewrites it.
	old, oldRanges := serviceEntries(cur.Frontend), rangeEntries(cur.Frontend)
	c.room.used.services -= old
	c.room.used.ranges -= oldRanges
	ps.frontends.room.services += max(0, old-entries)
	ps.frontends.room.ranges += max(0, oldRanges-ranges)
	// The backends it no longer has are counted out before the new ones
	// in, so that their reconciler deletes before it adds; those it
	// keeps are counted in and out, which writes a changed one.
	kept := map[Addr]bool{}
	for _, b := range r.Backends {
		kept[b.Addr] = true
	}
	var gone, stay []Backend
	for _, b := range cur.Backends {
		if kept[b.Addr] {
			stay = append(stay, b)
		} else {
			gone = append(gone, b)
		}
	}
	if err := c.refBackends(txn, gone, -1, ps); err != nil {
		return err
	}
	if err := c.refBackends(txn, r.Backends, 1, ps); err != nil {
		return err
	}
	return c.refBackends(txn, stay, -1, ps)
}

// drop deletes a row. Its room and numbers stay taken until the kernel
// has let go of them.
func (c *controller) drop(txn statedb.WriteTxn, r *FrontendRow, ps *pass) error {
	if _, _, err := c.tables.Frontends.Delete(txn, r); err != nil {
		return err
	}
	entries, ranges := serviceEntries(r.Frontend), rangeEntries(r.Frontend)
	c.room.used.services -= entries
	c.room.used.ranges -= ranges
	c.room.used.revNATs--
	ps.frontends.room.services += entries
	ps.frontends.room.ranges += ranges
	ps.frontends.room.revNATs++
	ps.frontends.addrs = append(ps.frontends.addrs, r.Addr)
	return c.refBackends(txn, r.Backends, -1, ps)
}

// remove deletes the rows the service holds and does not get, which a
// service later in the pass was to take over and did not (it was
// refused).
func (c *controller) remove(txn statedb.WriteTxn, p *plan, ps *pass) error {
	var gone []*FrontendRow
	for r := range c.tables.Frontends.List(txn, FrontendServiceIndex.Query(p.name)) {
		if !p.owned[r.Addr] {
			gone = append(gone, r)
		}
	}
	for _, r := range gone {
		if err := c.drop(txn, r, ps); err != nil {
			return err
		}
	}
	return nil
}

// loses says why the service n does not get frontend a; "" when it does.
func (c *controller) loses(n ServiceName, a Addr) string {
	holders := c.claims.holders[a.Address]
	o, ok := c.claims.owner(a)
	switch {
	case ok && o.Service == n:
		return ""
	case ok && slices.Contains(holders, o.Service):
		return fmt.Sprintf("%s: its address is the ClusterIP of %s", a, o.Service)
	case ok:
		return fmt.Sprintf("%s: the older Service %s has it", a, o.Service)
	case len(holders) > 0:
		return fmt.Sprintf("%s: its address is the ClusterIP of %s", a, holders[0])
	}
	return fmt.Sprintf("%s: nobody may have it", a) // n's claim is recorded: not reached
}

// delta is how much more (or less) the maps hold once a service's rows
// are the frontends fs, drop gone and the rest unchanged: rows it takes
// over from others count with what they held, and a new one with what
// the maps held for it at the start.
func (c *controller) delta(txn statedb.ReadTxn, fs []Frontend, drop []*FrontendRow) usage {
	var d usage
	left := c.room.left
	refs := map[Addr]int{} // change of each backend's count
	for _, r := range drop {
		d.services -= serviceEntries(r.Frontend)
		d.ranges -= rangeEntries(r.Frontend)
		d.revNATs--
		for _, b := range r.Backends {
			refs[b.Addr]--
		}
	}
	for _, f := range fs {
		if cur, _, held := c.tables.Frontends.Get(txn, FrontendAddrIndex.Query(f.Addr)); held {
			d.services += serviceEntries(f) - serviceEntries(cur.Frontend)
			d.ranges += rangeEntries(f) - rangeEntries(cur.Frontend)
			for _, b := range cur.Backends {
				refs[b.Addr]--
			}
		} else {
			d.services += serviceEntries(f) - left.entriesAt(f.Addr)
			idx, ok := c.ids.revNATs.byAddr[f.Addr]
			d.ranges += rangeEntries(f) - left.rangesAt(idx, ok)
			if !left.hasRevNAT(idx, ok) {
				d.revNATs++
			}
		}
		for _, b := range f.Backends {
			refs[b.Addr]++
		}
	}
	for a, change := range refs {
		before := c.backendRefs[a]
		switch after := before + change; {
		case before == 0 && after > 0:
			if id, ok := c.ids.backends.byAddr[a]; !left.hasBackend(id, ok) {
				d.backends++
			}
		case before > 0 && after <= 0:
			d.backends--
		}
	}
	return d
}

// rangesFit says why the source ranges of a service's frontends fs take
// more of the source range map than one Service may (1/rangeShare of it),
// and the part of that which depends on the service alone; "" when they
// do not. Its author wrote them, and every Service with ranges needs room.
func (c *controller) rangesFit(fs []Frontend) (why, key string) {
	n, fenced, prefixes := 0, 0, 0
	for _, f := range fs {
		if r := rangeEntries(f); r > 0 {
			n += r
			fenced++
			prefixes = r
		}
	}
	limit := max(1, c.room.limit.ranges/rangeShare)
	if n <= limit {
		return "", ""
	}
	key = fmt.Sprintf("its loadBalancerSourceRanges need %d source range entries (%d prefixes at %d frontends)",
		n, prefixes, fenced)
	return fmt.Sprintf("%s, at most %d per Service (1/%d of --bpf-lb-map-max)", key, limit, rangeShare), key
}

// rows numbers the frontends' backends and reverse translations. When
// numbers run out, those it handed out go back.
func (c *controller) rows(fs []Frontend, ps *pass) ([]*FrontendRow, error) {
	var newFronts, newBacks []Addr
	giveBack := func() {
		for _, a := range newFronts {
			c.ids.revNATs.release(a)
		}
		for _, a := range newBacks {
			c.ids.backends.release(a)
		}
	}
	backendID := func(b Backend) (spec.BackendID, error) {
		_, had := c.ids.backends.byAddr[b.Addr]
		id, err := c.ids.backends.get(b.Addr)
		if err == nil && !had {
			newBacks = append(newBacks, b.Addr)
		}
		return id, err
	}
	var out []*FrontendRow
	for _, f := range fs {
		_, had := c.ids.revNATs.byAddr[f.Addr]
		idx, err := c.ids.revNATs.get(f.Addr)
		if err != nil {
			giveBack()
			return nil, fmt.Errorf("no reverse NAT index left for %s", f.Addr)
		}
		if !had {
			newFronts = append(newFronts, f.Addr)
		}
		r := &FrontendRow{Frontend: f, RevNATIndex: idx}
		for _, b := range f.Backends {
			id, err := backendID(b)
			if err != nil {
				giveBack()
				return nil, fmt.Errorf("no backend id left for %s", b.Addr)
			}
			r.BackendSpecs = append(r.BackendSpecs, spec.Backend{ID: id, Address: b.Address, Port: b.Port,
				Protocol: b.Protocol, Terminating: b.Terminating})
		}
		// Slots name backends of f.Backends, numbered just above.
		for _, b := range f.Slots {
			id, _ := backendID(b)
			r.SlotIDs = append(r.SlotIDs, id)
		}
		if f.InternalSlots != nil {
			r.InternalSlotIDs = []spec.BackendID{}
		}
		for _, b := range f.InternalSlots {
			id, _ := backendID(b)
			r.InternalSlotIDs = append(r.InternalSlotIDs, id)
		}
		out = append(out, r)
	}
	ps.numberedFrontends = append(ps.numberedFrontends, newFronts...)
	ps.numberedBackends = append(ps.numberedBackends, newBacks...)
	return out, nil
}

// refBackends counts a frontend's backends in (delta 1) or out (-1): a
// backend no frontend serves leaves the table, a new or changed one goes
// in.
func (c *controller) refBackends(txn statedb.WriteTxn, bs []Backend, delta int, ps *pass) error {
	for _, b := range bs {
		before := c.backendRefs[b.Addr]
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
			c.room.used.backends--
			ps.backends.room.backends++
			ps.backends.addrs = append(ps.backends.addrs, b.Addr)
			continue
		}
		if delta < 0 {
			continue
		}
		if before == 0 {
			c.room.used.backends++
			c.room.left.takeBackend(id)
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

// report logs and warns what changed for the pass's services: refused,
// or claiming frontends that others get.
func (c *controller) report(plans []*plan) {
	for _, p := range plans {
		n := p.name
		if !p.exists {
			delete(c.refused, n)
			delete(c.lost, n)
			delete(c.badAlgorithm, n)
			continue
		}
		if why := c.local.BadAlgorithm(p.svc); why != c.badAlgorithm[n] {
			if why != "" {
				c.log.Warn("Service annotation ignored", "service", n, "reason", why)
				c.warn(n, ReasonBadAlgorithm, why)
				c.badAlgorithm[n] = why
			} else {
				delete(c.badAlgorithm, n)
			}
		}
		if p.refused != "" && c.refused[n].key != p.refusal.key {
			c.log.Warn("Service refused: it does not fit in the service maps; nothing of it is written",
				"service", n, "reason", p.refused)
			c.warn(n, ReasonServiceRefused, "refused, nothing of it is written (what it had stays): "+p.refused+
				"; it is tried again when room frees")
		}
		if p.refused != "" {
			c.refused[n] = p.refusal
		} else if _, was := c.refused[n]; was {
			c.log.Info("Service written after it was refused", "service", n)
			delete(c.refused, n)
		}
		var news []string
		for a, why := range p.lost {
			if c.lost[n][a] != why {
				news = append(news, why)
			}
		}
		if len(news) > 0 {
			slices.Sort(news)
			c.log.Warn("Service claims frontends that another Service owns", "service", n, "frontends", len(news),
				"first", news[0])
			msg := strings.Join(news[:min(len(news), 3)], "; ")
			if len(news) > 3 {
				msg += fmt.Sprintf("; and %d more", len(news)-3)
			}
			c.warn(n, ReasonFrontendConflict, "frontends not served for this Service: "+msg)
		}
		c.lost[n] = p.lost
		if len(p.lost) == 0 {
			delete(c.lost, n)
		}
	}
}

func (c *controller) warn(n ServiceName, reason, message string) {
	if c.events != nil {
		c.events.Warn(n, reason, message)
	}
}
