// Package ipam hands out pod addresses from this node's pod CIDR. Each
// address goes to one owner (a container id) at a time, and every change
// is written to the state directory before it is acknowledged, so an agent
// restart never hands out an address that a running pod still holds.
package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cilium-go/cilium/pkg/paths"
)

// ErrExhausted: every address of the pod CIDR is taken.
var ErrExhausted = errors.New("pod CIDR exhausted")

// ErrNotAllocated: the address is not handed out.
var ErrNotAllocated = errors.New("address not allocated")

// ErrNoPodCIDR means the node's pod CIDR is not known yet.
var ErrNoPodCIDR = errors.New("no pod CIDR for this node yet")

// Result is an allocation as the pod needs it.
type Result struct {
	IP      netip.Addr
	Gateway netip.Addr
	PodCIDR netip.Prefix
}

// Allocation is one handed-out address.
type Allocation struct {
	IP    netip.Addr `json:"ip"`
	Owner string     `json:"owner"`
}

// Allocator is the node's pool. It is safe for concurrent use.
type Allocator struct {
	cidr    netip.Prefix
	gateway netip.Addr
	file    string

	mu    sync.Mutex
	owner map[netip.Addr]string
	next  netip.Addr // where the search for a free address starts
	// asked is when each owner last asked for its address, in this
	// process: an owner that asks again is alive, not an orphan.
	asked map[string]time.Time
	now   func() time.Time
}

// state is the file format.
type state struct {
	PodCIDR     netip.Prefix `json:"podCIDR"`
	Allocations []Allocation `json:"allocations"`
	// Next is where the next search starts: kept so that a restart does
	// not hand a just-released address out again at once.
	Next netip.Addr `json:"next,omitzero"`
}

// New opens the pool of cidr persisted in file (created on first write).
// Allocations from file that lie outside cidr are returned as dropped:
// the node's CIDR changed under them.
func New(cidr netip.Prefix, gateway netip.Addr, file string) (*Allocator, []Allocation, error) {
	a := NewPending(gateway, file)
	dropped, err := a.Open(cidr)
	if err != nil {
		return nil, nil, err
	}
	return a, dropped, nil
}

// NewPending is a pool whose CIDR is not known yet, because the operator
// has not written it into the node's CiliumNode: Allocate fails with
// ErrNoPodCIDR until Open.
func NewPending(gateway netip.Addr, file string) *Allocator {
	return &Allocator{gateway: gateway, file: file, owner: map[netip.Addr]string{},
		asked: map[string]time.Time{}, now: time.Now}
}

// Open gives a pending pool its CIDR and loads what file holds, returning
// the allocations outside cidr as dropped.
func (a *Allocator) Open(cidr netip.Prefix) ([]Allocation, error) {
	if err := validCIDR(cidr); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cidr.IsValid() {
		return nil, fmt.Errorf("pod CIDR %s: pool already open with %s", cidr, a.cidr)
	}
	var st state
	b, err := os.ReadFile(a.file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", a.file, err)
	default:
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("parse %s: %w", a.file, err)
		}
	}
	a.cidr = cidr.Masked()
	a.next = first(a.cidr)
	if a.usable(st.Next) {
		a.next = st.Next
	}
	var dropped []Allocation
	for _, al := range st.Allocations {
		if !a.usable(al.IP) {
			dropped = append(dropped, al)
			continue
		}
		a.owner[al.IP] = al.Owner
	}
	if len(dropped) > 0 {
		return dropped, a.persistLocked()
	}
	return nil, nil
}

func validCIDR(p netip.Prefix) error {
	if !p.IsValid() || !p.Addr().Is4() {
		return fmt.Errorf("pod CIDR %s: IPv4 prefix required", p)
	}
	if p.Bits() > 30 {
		return fmt.Errorf("pod CIDR %s: too small, at most /30", p)
	}
	return nil
}

// first is the first usable address: the network address is skipped.
func first(p netip.Prefix) netip.Addr { return p.Addr().Next() }

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (a *Allocator) usable(ip netip.Addr) bool {
	return a.cidr.Contains(ip) && ip != a.cidr.Addr() && ip != broadcast(a.cidr)
}

// PodCIDR is the pool's prefix; invalid while the pool is pending.
func (a *Allocator) PodCIDR() netip.Prefix {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cidr
}

// Allocate hands owner an address. An owner that already holds one gets
// the same one again, which makes a retried CNI ADD harmless.
func (a *Allocator) Allocate(owner string) (Result, error) {
	if owner == "" {
		return Result{}, errors.New("allocate: owner required")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.cidr.IsValid() {
		return Result{}, fmt.Errorf("allocate for %s: %w", owner, ErrNoPodCIDR)
	}
	a.asked[owner] = a.now()
	for ip, o := range a.owner {
		if o == owner {
			return a.result(ip), nil
		}
	}
	ip, ok := a.findFreeLocked()
	if !ok {
		return Result{}, fmt.Errorf("allocate for %s in %s: %w", owner, a.cidr, ErrExhausted)
	}
	a.owner[ip] = owner
	prev := a.next
	a.next = ip.Next()
	if err := a.persistLocked(); err != nil {
		delete(a.owner, ip)
		a.next = prev
		return Result{}, err
	}
	return a.result(ip), nil
}

// findFreeLocked walks the pool once, starting after the last handout,
// so a just-released address is not reused at once.
func (a *Allocator) findFreeLocked() (netip.Addr, bool) {
	ip := a.next
	for range 1 << (32 - a.cidr.Bits()) {
		if !a.usable(ip) {
			ip = first(a.cidr)
		}
		if _, taken := a.owner[ip]; !taken {
			return ip, true
		}
		ip = ip.Next()
	}
	return netip.Addr{}, false
}

func (a *Allocator) result(ip netip.Addr) Result {
	return Result{IP: ip, Gateway: a.gateway, PodCIDR: a.cidr}
}

// Release frees ip.
func (a *Allocator) Release(ip netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	owner, ok := a.owner[ip]
	if !ok {
		return fmt.Errorf("release %s: %w", ip, ErrNotAllocated)
	}
	delete(a.owner, ip)
	if err := a.persistLocked(); err != nil {
		a.owner[ip] = owner
		return err
	}
	return nil
}

// ReleaseOwner frees whatever owner holds; holding nothing is no error.
func (a *Allocator) ReleaseOwner(owner string) error {
	a.mu.Lock()
	var ip netip.Addr
	for addr, o := range a.owner {
		if o == owner {
			ip = addr
		}
	}
	a.mu.Unlock()
	if !ip.IsValid() {
		return nil
	}
	err := a.Release(ip)
	if errors.Is(err, ErrNotAllocated) { // released concurrently
		return nil
	}
	return err
}

// Owner is the container that holds ip, if any.
func (a *Allocator) Owner(ip netip.Addr) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.owner[ip]
	return o, ok
}

// List is every allocation, by address.
func (a *Allocator) List() []Allocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.listLocked()
}

func (a *Allocator) listLocked() []Allocation {
	out := make([]Allocation, 0, len(a.owner))
	for ip, o := range a.owner {
		out = append(out, Allocation{IP: ip, Owner: o})
	}
	slices.SortFunc(out, func(x, y Allocation) int { return x.IP.Compare(y.IP) })
	return out
}

// persistLocked writes the pool atomically: a crash leaves either the old
// or the new file, never half of one.
func (a *Allocator) persistLocked() error {
	b, err := json.MarshalIndent(state{PodCIDR: a.cidr, Allocations: a.listLocked(), Next: a.next}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode ipam state: %w", err)
	}
	return paths.WriteFileAtomic(a.file, b)
}
