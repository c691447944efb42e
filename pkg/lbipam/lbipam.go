// Package lbipam hands out LoadBalancer addresses from pools, with the
// semantics of Cilium's LB-IPAM (CiliumLoadBalancerIPPool): pools of
// address ranges that select Services by label, addresses a Service asks
// for by name, and addresses that Services with one sharing key share
// when their ports do not collide.
//
// Allocate is the pure function at its centre: pools and Services in,
// each Service's addresses with its condition and each pool's counts and
// conflict out. The Services' status is the record: a Service keeps the
// addresses its status holds while they stay valid, so that a restarted
// or failed-over operator hands out nothing twice and moves nothing.
// pkg/lbipam/k8s reads the objects; the operator's controller writes the
// results back.
package lbipam

import (
	"cmp"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"time"
)

// Name names a Service: namespace/name.
type Name struct{ Namespace, Name string }

func (n Name) String() string { return n.Namespace + "/" + n.Name }

// Range is the addresses from From to To, both included.
type Range struct{ From, To netip.Addr }

// Contains says whether a is in r.
func (r Range) Contains(a netip.Addr) bool {
	return a.BitLen() == r.From.BitLen() && r.From.Compare(a) <= 0 && a.Compare(r.To) <= 0
}

func (r Range) overlaps(o Range) bool {
	return r.From.BitLen() == o.From.BitLen() && r.From.Compare(o.To) <= 0 && o.From.Compare(r.To) <= 0
}

func (r Range) String() string {
	if r.From == r.To {
		return r.From.String()
	}
	return r.From.String() + "-" + r.To.String()
}

// size is how many addresses r holds.
func (r Range) size() *big.Int {
	n := new(big.Int).Sub(new(big.Int).SetBytes(r.To.AsSlice()), new(big.Int).SetBytes(r.From.AsSlice()))
	return n.Add(n, big.NewInt(1))
}

// CIDRRange is a CIDR block's range: without its first and last
// addresses when allowFirstLast is false, except in a block of one or two
// addresses, which would keep none.
func CIDRRange(p netip.Prefix, allowFirstLast bool) Range {
	p = p.Masked()
	r := Range{From: p.Addr(), To: lastAddr(p)}
	if !allowFirstLast && r.From.Next() != r.To && r.From != r.To {
		r.From, r.To = r.From.Next(), r.To.Prev()
	}
	return r
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Pool is a CiliumLoadBalancerIPPool as allocation needs it.
type Pool struct {
	Name    string
	Created time.Time
	// Ranges are its blocks, a CIDR's first and last addresses left out
	// already when allowFirstLastIPs is No.
	Ranges []Range
	// Disabled: no new address comes from it; the ones handed out stay.
	Disabled bool
	// Selects says whether the pool serves a Service with these labels
	// (the Service's own and its namespace's and name's, see
	// ServiceLabels); nil serves every Service.
	Selects func(labels map[string]string) bool
}

func (p *Pool) selects(s *Service) bool { return p.Selects == nil || p.Selects(s.Labels) }

func (p *Pool) contains(a netip.Addr) bool {
	return slices.ContainsFunc(p.Ranges, func(r Range) bool { return r.Contains(a) })
}

// Port is a Service port, for sharing: two Services sharing an address
// must not both serve one port and protocol.
type Port struct {
	Port     uint16
	Protocol string
}

// Service is a LoadBalancer Service that LB-IPAM serves.
type Service struct {
	Name    Name
	Created time.Time
	UID     string
	// Labels select pools: see ServiceLabels.
	Labels map[string]string
	// Requested are the addresses it asks for (spec.loadBalancerIP, the
	// lbipam.cilium.io/ips annotation); none: any one address.
	Requested []netip.Addr
	// SharingKey (lbipam.cilium.io/sharing-key): Services with the same
	// key may share an address.
	SharingKey string
	// ShareWith are the other namespaces whose Services may share its
	// address (lbipam.cilium.io/sharing-cross-namespace; "*": any).
	ShareWith []string
	Ports     []Port
	// ExternalLocal: externalTrafficPolicy Local. Selector is its pod
	// selector, as a comparable string; empty: it has none.
	ExternalLocal bool
	Selector      string
	// Current are the addresses its status holds: the record.
	Current []netip.Addr
}

// The labels every Service has for pool selectors, as Cilium gives them.
const (
	LabelServiceNamespace = "io.kubernetes.service.namespace"
	LabelServiceName      = "io.kubernetes.service.name"
)

// ServiceLabels are labels with the Service's namespace and name added,
// which pool selectors can name.
func ServiceLabels(n Name, labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+2)
	for k, v := range labels {
		out[k] = v
	}
	out[LabelServiceNamespace], out[LabelServiceName] = n.Namespace, n.Name
	return out
}

// Reasons of a Service's condition, as Cilium names them.
const (
	ReasonSatisfied              = "satisfied"
	ReasonNoPool                 = "no_pool"
	ReasonOutOfIPs               = "out_of_ips"
	ReasonPoolSelectorMismatch   = "pool_selector_mismatch"
	ReasonAlreadyAllocated       = "already_allocated"
	ReasonAlreadyAllocatedShared = "already_allocated_incompatible_service"
)

// Assignment is what a Service gets.
type Assignment struct {
	Service Name
	// Addrs are its addresses, sorted; none when unsatisfied.
	Addrs []netip.Addr
	// Satisfied, Reason and Message are its IPAMRequestSatisfied
	// condition.
	Satisfied       bool
	Reason, Message string
}

// PoolStatus is a pool's counts and conflict.
type PoolStatus struct {
	Name string
	// Total, Used and Available count addresses (a pool of IPv6 ranges
	// may hold more than any integer type: decimal strings).
	Total, Used, Available string
	// Conflict: its ranges overlap each other or an older pool's, and it
	// hands out nothing; Message says which.
	Conflict bool
	Message  string
}

// Allocate decides every Service's addresses from the pools. It depends on
// its inputs alone, not on their order: Services are served oldest first,
// pools in the order of their names.
func Allocate(pools []Pool, services []Service) ([]Assignment, []PoolStatus) {
	pools = slices.Clone(pools)
	slices.SortFunc(pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	conflicts := poolConflicts(pools)
	svcs := slices.Clone(services)
	slices.SortFunc(svcs, func(a, b Service) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.UID, b.UID),
			cmp.Compare(a.Name.Namespace, b.Name.Namespace), cmp.Compare(a.Name.Name, b.Name.Name))
	})
	a := &allocator{pools: pools, conflicts: conflicts, holders: map[netip.Addr][]*Service{}}

	out := make([]Assignment, len(svcs))
	// The record first: every Service keeps what its status holds and is
	// still valid, before any Service gets a new address.
	kept := make([]bool, len(svcs))
	for i := range svcs {
		s := &svcs[i]
		out[i] = Assignment{Service: s.Name}
		if addrs := a.keep(s); len(addrs) > 0 {
			out[i].Addrs, kept[i] = addrs, true
			out[i].Satisfied, out[i].Reason, out[i].Message = true, ReasonSatisfied, ""
		}
	}
	for i := range svcs {
		if !kept[i] {
			out[i] = a.assign(&svcs[i])
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Addrs, netip.Addr.Compare)
	}
	slices.SortFunc(out, func(x, y Assignment) int {
		return cmp.Or(cmp.Compare(x.Service.Namespace, y.Service.Namespace), cmp.Compare(x.Service.Name, y.Service.Name))
	})
	return out, a.statuses()
}

type allocator struct {
	pools     []Pool
	conflicts map[string]string // pool name -> why it conflicts
	// holders are the Services an address is given to.
	holders map[netip.Addr][]*Service
}

// enabled says whether p hands out new addresses: neither disabled nor
// in conflict.
func (a *allocator) enabled(p *Pool) bool {
	_, bad := a.conflicts[p.Name]
	return !bad && !p.Disabled
}

// usable says whether pool p may hold an address for s: fresh says whether
// it must hand out a new one (a disabled pool keeps what it gave, a pool
// in conflict nothing).
func (a *allocator) usable(p *Pool, s *Service, fresh bool) bool {
	if _, bad := a.conflicts[p.Name]; bad || fresh && p.Disabled {
		return false
	}
	return p.selects(s)
}

// keep is what s keeps of the addresses its status holds: those still in
// a pool that selects it, asked for (when it asks for some), and not held
// by a Service it may not share with. All or nothing: a Service whose
// record no longer holds is served again from scratch.
func (a *allocator) keep(s *Service) []netip.Addr {
	if len(s.Current) == 0 || len(s.Requested) > 0 && !sameSet(s.Current, s.Requested) {
		return nil
	}
	for _, addr := range s.Current {
		if !slices.ContainsFunc(a.pools, func(p Pool) bool { return a.usable(&p, s, false) && p.contains(addr) }) {
			return nil
		}
		if !a.sharable(addr, s) {
			return nil
		}
	}
	for _, addr := range s.Current {
		a.holders[addr] = append(a.holders[addr], s)
	}
	return slices.Clone(s.Current)
}

func sameSet(a, b []netip.Addr) bool {
	return !slices.ContainsFunc(a, func(x netip.Addr) bool { return !slices.Contains(b, x) }) &&
		!slices.ContainsFunc(b, func(x netip.Addr) bool { return !slices.Contains(a, x) })
}

// sharable says whether s may have addr beside the Services that hold it.
func (a *allocator) sharable(addr netip.Addr, s *Service) bool {
	for _, h := range a.holders[addr] {
		if ok, _ := compatible(h, s); !ok {
			return false
		}
	}
	return true
}

// assign gives s new addresses: those it asks for, or one address,
// shared with a Service of its sharing key where one allows it, else the
// first free one of the first pool that selects it.
func (a *allocator) assign(s *Service) Assignment {
	res := Assignment{Service: s.Name}
	unsatisfied := func(reason, format string, args ...any) Assignment {
		res.Reason, res.Message = reason, fmt.Sprintf(format, args...)
		return res
	}
	if len(s.Requested) > 0 {
		for _, addr := range s.Requested {
			if !slices.ContainsFunc(a.pools, func(p Pool) bool { return a.usable(&p, s, true) && p.contains(addr) }) {
				if slices.ContainsFunc(a.pools, func(p Pool) bool { return a.enabled(&p) && p.contains(addr) }) {
					return unsatisfied(ReasonPoolSelectorMismatch, "the pool holding %s does not select this Service", addr)
				}
				return unsatisfied(ReasonNoPool, "no enabled pool that selects this Service holds %s", addr)
			}
			for _, h := range a.holders[addr] {
				if s.SharingKey == "" || h.SharingKey == "" {
					return unsatisfied(ReasonAlreadyAllocated, "%s is in use by Service %s", addr, h.Name)
				}
				if ok, why := compatible(h, s); !ok {
					return unsatisfied(ReasonAlreadyAllocatedShared, "%s is in use by Service %s, which this one may not share it with: %s", addr, h.Name, why)
				}
			}
		}
		for _, addr := range s.Requested {
			a.holders[addr] = append(a.holders[addr], s)
		}
		res.Addrs = slices.Clone(s.Requested)
		res.Satisfied, res.Reason = true, ReasonSatisfied
		return res
	}
	if s.SharingKey != "" {
		for _, addr := range a.sortedHeld() {
			hs := a.holders[addr]
			if !slices.ContainsFunc(hs, func(h *Service) bool { return h.SharingKey == s.SharingKey }) || !a.sharable(addr, s) {
				continue
			}
			if !slices.ContainsFunc(a.pools, func(p Pool) bool { return a.usable(&p, s, false) && p.contains(addr) }) {
				continue
			}
			a.holders[addr] = append(hs, s)
			res.Addrs, res.Satisfied, res.Reason = []netip.Addr{addr}, true, ReasonSatisfied
			return res
		}
	}
	matched := false
	for i := range a.pools {
		p := &a.pools[i]
		if !a.usable(p, s, true) {
			continue
		}
		matched = true
		if addr, ok := a.free(p); ok {
			a.holders[addr] = append(a.holders[addr], s)
			res.Addrs, res.Satisfied, res.Reason = []netip.Addr{addr}, true, ReasonSatisfied
			return res
		}
	}
	if !matched {
		return unsatisfied(ReasonNoPool, "no enabled pool selects this Service")
	}
	return unsatisfied(ReasonOutOfIPs, "every enabled pool that selects this Service is out of addresses")
}

// free is p's lowest address that nobody holds. IPv4 only: LB-IPAM hands
// out one IPv4 address to a Service that asks for none.
func (a *allocator) free(p *Pool) (netip.Addr, bool) {
	for _, r := range p.Ranges {
		if !r.From.Is4() {
			continue
		}
		for addr := r.From; addr.IsValid() && addr.Compare(r.To) <= 0; addr = addr.Next() {
			if len(a.holders[addr]) == 0 {
				return addr, true
			}
		}
	}
	return netip.Addr{}, false
}

func (a *allocator) sortedHeld() []netip.Addr {
	out := make([]netip.Addr, 0, len(a.holders))
	for addr := range a.holders {
		out = append(out, addr)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// compatible says whether two Services may share an address, as Cilium
// decides: the same sharing key, the same namespace or each allowing the
// other's, no port and protocol in common, the same external traffic
// policy, and with policy Local the same pods.
func compatible(x, y *Service) (bool, string) {
	switch {
	case x.SharingKey == "" || x.SharingKey != y.SharingKey:
		return false, "different sharing key"
	case x.Name.Namespace != y.Name.Namespace && !(allows(x, y.Name.Namespace) && allows(y, x.Name.Namespace)):
		return false, "different namespace, not allowed by both"
	case slices.ContainsFunc(x.Ports, func(p Port) bool { return slices.Contains(y.Ports, p) }):
		return false, "same port and protocol"
	case x.ExternalLocal != y.ExternalLocal:
		return false, "different externalTrafficPolicy"
	case x.ExternalLocal && (x.Selector == "" || x.Selector != y.Selector):
		return false, "externalTrafficPolicy Local with different pods"
	}
	return true, ""
}

func allows(s *Service, namespace string) bool {
	return slices.Contains(s.ShareWith, "*") || slices.Contains(s.ShareWith, namespace)
}

// poolConflicts finds the pools that hand out nothing: those whose ranges
// overlap each other, then, in order of age, those that overlap an older
// pool that does not conflict.
func poolConflicts(pools []Pool) map[string]string {
	out := map[string]string{}
	byAge := make([]*Pool, 0, len(pools))
	for i := range pools {
		p := &pools[i]
		if x, y, ok := overlap(p.Ranges, p.Ranges, true); ok {
			out[p.Name] = fmt.Sprintf("its ranges %s and %s overlap", x, y)
			continue
		}
		byAge = append(byAge, p)
	}
	slices.SortStableFunc(byAge, func(a, b *Pool) int { return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name)) })
	for i, p := range byAge {
		for _, older := range byAge[:i] {
			if _, bad := out[older.Name]; bad {
				continue
			}
			if x, y, ok := overlap(p.Ranges, older.Ranges, false); ok {
				out[p.Name] = fmt.Sprintf("its range %s overlaps %s of the older pool %s", x, y, older.Name)
				break
			}
		}
	}
	return out
}

// overlap finds a range of xs that overlaps one of ys; within says xs and
// ys are one list, whose ranges are not compared with themselves.
func overlap(xs, ys []Range, within bool) (Range, Range, bool) {
	for i, x := range xs {
		for j, y := range ys {
			if within && j <= i {
				continue
			}
			if x.overlaps(y) {
				return x, y, true
			}
		}
	}
	return Range{}, Range{}, false
}

func (a *allocator) statuses() []PoolStatus {
	out := make([]PoolStatus, 0, len(a.pools))
	for i := range a.pools {
		p := &a.pools[i]
		total, used := new(big.Int), int64(0)
		for _, r := range p.Ranges {
			total.Add(total, r.size())
		}
		for addr := range a.holders {
			if p.contains(addr) {
				used++
			}
		}
		why, conflict := a.conflicts[p.Name]
		st := PoolStatus{Name: p.Name, Conflict: conflict, Message: why, Total: total.String()}
		if conflict {
			used = 0
		}
		st.Used = fmt.Sprint(used)
		st.Available = new(big.Int).Sub(total, big.NewInt(used)).String()
		out = append(out, st)
	}
	return out
}
