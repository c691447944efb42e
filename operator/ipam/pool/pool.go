// Package pool hands out fixed-size pod CIDRs to nodes from a list of cluster
// CIDRs. It is pure bookkeeping: the ipam controller decides which node gets
// what and persists the result in CiliumNodes, from which a new leader
// rebuilds the pool with Occupy.
package pool

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
)

// ErrExhausted is returned (wrapped, naming the pool) when no CIDR is free.
var ErrExhausted = errors.New("pool exhausted")

// Pool allocates /MaskSize subnets of its cluster CIDRs. Not safe for
// concurrent use: the controller owns it from one goroutine.
type Pool struct {
	cidrs    []netip.Prefix
	maskSize int
	byOwner  map[string]netip.Prefix
	used     map[netip.Prefix]string
}

// New checks that every cluster CIDR is IPv4, canonical and no longer than
// maskSize, and that the CIDRs do not overlap.
func New(cidrs []netip.Prefix, maskSize int) (*Pool, error) {
	if len(cidrs) == 0 {
		return nil, errors.New("no cluster CIDR")
	}
	if maskSize < 1 || maskSize > 32 {
		return nil, fmt.Errorf("mask size %d: not in 1..32", maskSize)
	}
	for i, c := range cidrs {
		if !c.Addr().Is4() {
			return nil, fmt.Errorf("cluster CIDR %s: not IPv4", c)
		}
		if c.Masked() != c {
			return nil, fmt.Errorf("cluster CIDR %s: host bits set (want %s)", c, c.Masked())
		}
		if c.Bits() > maskSize {
			return nil, fmt.Errorf("cluster CIDR %s: smaller than mask size /%d", c, maskSize)
		}
		for _, d := range cidrs[:i] {
			if c.Overlaps(d) {
				return nil, fmt.Errorf("cluster CIDRs %s and %s overlap", d, c)
			}
		}
	}
	return &Pool{
		cidrs:    append([]netip.Prefix(nil), cidrs...),
		maskSize: maskSize,
		byOwner:  map[string]netip.Prefix{},
		used:     map[netip.Prefix]string{},
	}, nil
}

// String names the pool in errors and logs.
func (p *Pool) String() string {
	s := make([]string, len(p.cidrs))
	for i, c := range p.cidrs {
		s[i] = c.String()
	}
	return fmt.Sprintf("cluster-pool %s /%d", strings.Join(s, ","), p.maskSize)
}

// Get returns owner's CIDR, if it has one.
func (p *Pool) Get(owner string) (netip.Prefix, bool) {
	c, ok := p.byOwner[owner]
	return c, ok
}

// Occupy records that owner holds cidr, as found in an existing CiliumNode.
// It fails if cidr is not one of the pool's subnets or another owner holds
// it; the caller then gives owner a fresh CIDR instead.
func (p *Pool) Occupy(owner string, cidr netip.Prefix) error {
	if cidr.Bits() != p.maskSize || cidr.Masked() != cidr || !p.contains(cidr) {
		return fmt.Errorf("%s is not a subnet of %s", cidr, p)
	}
	if o, ok := p.used[cidr]; ok && o != owner {
		return fmt.Errorf("%s is already held by %s", cidr, o)
	}
	if old, ok := p.byOwner[owner]; ok && old != cidr {
		return fmt.Errorf("%s already holds %s", owner, old)
	}
	p.used[cidr] = owner
	p.byOwner[owner] = cidr
	return nil
}

// Allocate returns owner's CIDR, taking the lowest free one if it has none.
func (p *Pool) Allocate(owner string) (netip.Prefix, error) {
	if c, ok := p.byOwner[owner]; ok {
		return c, nil
	}
	for _, c := range p.cidrs {
		n := subnets(c, p.maskSize)
		for i := new(big.Int); i.Cmp(n) < 0; i.Add(i, big.NewInt(1)) {
			s := nth(c, p.maskSize, i)
			if _, taken := p.used[s]; !taken {
				p.used[s] = owner
				p.byOwner[owner] = s
				return s, nil
			}
		}
	}
	return netip.Prefix{}, fmt.Errorf("%s for %s: %w", p, owner, ErrExhausted)
}

// Release frees owner's CIDR; releasing an owner without one does nothing.
func (p *Pool) Release(owner string) {
	if c, ok := p.byOwner[owner]; ok {
		delete(p.used, c)
		delete(p.byOwner, owner)
	}
}

// Owners returns every owner holding a CIDR.
func (p *Pool) Owners() map[string]netip.Prefix {
	out := make(map[string]netip.Prefix, len(p.byOwner))
	for o, c := range p.byOwner {
		out[o] = c
	}
	return out
}

func (p *Pool) contains(s netip.Prefix) bool {
	for _, c := range p.cidrs {
		if c.Contains(s.Addr()) {
			return true
		}
	}
	return false
}

// subnets is how many /size subnets c has.
func subnets(c netip.Prefix, size int) *big.Int {
	return new(big.Int).Lsh(big.NewInt(1), uint(size-c.Bits()))
}

// nth is the i-th /size subnet of c.
func nth(c netip.Prefix, size int, i *big.Int) netip.Prefix {
	base := new(big.Int).SetBytes(c.Addr().AsSlice())
	off := new(big.Int).Lsh(i, uint(32-size))
	b := new(big.Int).Add(base, off).FillBytes(make([]byte, 4))
	return netip.PrefixFrom(netip.AddrFrom4([4]byte(b)), size)
}
