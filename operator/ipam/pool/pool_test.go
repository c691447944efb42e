package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, c := range s {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cidrs []string
		mask  int
		want  string
	}{
		{"none", nil, 24, "no cluster CIDR"},
		{"mask too big", []string{"10.0.0.0/8"}, 33, "mask size 33"},
		{"ipv6", []string{"fd00::/64"}, 24, "not IPv4"},
		{"host bits", []string{"10.0.0.1/16"}, 24, "host bits"},
		{"smaller than mask", []string{"10.0.0.0/25"}, 24, "smaller than mask"},
		{"overlap", []string{"10.0.0.0/16", "10.0.1.0/24"}, 24, "overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(prefixes(tc.cidrs...), tc.mask)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAllocateInOrderAcrossCIDRs(t *testing.T) {
	p, err := New(prefixes("10.0.0.0/23", "10.9.0.0/24"), 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ owner, want string }{
		{"a", "10.0.0.0/24"},
		{"b", "10.0.1.0/24"},
		{"a", "10.0.0.0/24"}, // same owner, same CIDR
		{"c", "10.9.0.0/24"},
	} {
		got, err := p.Allocate(tc.owner)
		if err != nil || got.String() != tc.want {
			t.Fatalf("allocate %s: %v %v, want %s", tc.owner, got, err, tc.want)
		}
	}
	_, err = p.Allocate("d")
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "10.0.0.0/23,10.9.0.0/24") {
		t.Fatalf("exhausted: %v", err)
	}
	p.Release("b")
	if got, err := p.Allocate("d"); err != nil || got.String() != "10.0.1.0/24" {
		t.Fatalf("after release: %v %v", got, err)
	}
}

func TestOccupy(t *testing.T) {
	for _, tc := range []struct {
		name, owner, cidr, want string
	}{
		{"ok", "n2", "10.0.3.0/24", ""},
		{"same again", "n1", "10.0.1.0/24", ""},
		{"taken", "n2", "10.0.1.0/24", "held by n1"},
		{"owner has another", "n1", "10.0.2.0/24", "already holds"},
		{"outside", "n2", "10.1.0.0/24", "not a subnet"},
		{"wrong size", "n2", "10.0.4.0/25", "not a subnet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(prefixes("10.0.0.0/16"), 24)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Occupy("n1", netip.MustParsePrefix("10.0.1.0/24")); err != nil {
				t.Fatal(err)
			}
			err = p.Occupy(tc.owner, netip.MustParsePrefix(tc.cidr))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRandomOperationsNeverOverlap runs random allocate, occupy and release
// sequences and checks after each step that no two owners share or overlap
// a CIDR, every CIDR lies in the pool, and allocation fails only when every
// subnet is taken.
func TestRandomOperationsNeverOverlap(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		cidrs := prefixes("10.0.0.0/28", "192.168.4.0/29")
		p, err := New(cidrs, 30) // 4 + 2 subnets
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 60; step++ {
			owner := fmt.Sprintf("n%d", rng.IntN(10))
			switch rng.IntN(3) {
			case 0:
				_, err := p.Allocate(owner)
				if err != nil && (!errors.Is(err, ErrExhausted) || len(p.Owners()) != 6) {
					t.Fatalf("seed %d: allocate with %d owners: %v", seed, len(p.Owners()), err)
				}
			case 1:
				p.Release(owner)
			case 2:
				c := cidrs[rng.IntN(2)]
				s := netip.PrefixFrom(c.Addr(), 30)
				_ = p.Occupy(owner, s) // may rightly fail; the invariant must hold either way
			}
			checkDisjoint(t, seed, p, cidrs)
		}
	}
}

func checkDisjoint(t *testing.T, seed uint64, p *Pool, cidrs []netip.Prefix) {
	t.Helper()
	seen := map[string]netip.Prefix{}
	for o, c := range p.Owners() {
		if c.Bits() != 30 || !(cidrs[0].Contains(c.Addr()) || cidrs[1].Contains(c.Addr())) {
			t.Fatalf("seed %d: %s has %s outside the pool", seed, o, c)
		}
		for o2, c2 := range seen {
			if c.Overlaps(c2) {
				t.Fatalf("seed %d: %s and %s share %s/%s", seed, o, o2, c, c2)
			}
		}
		seen[o] = c
	}
}
