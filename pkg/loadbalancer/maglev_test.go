package loadbalancer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func backendNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("10.0.%d.%d:8080/TCP", i/250, i%250+1))
	}
	return out
}

// Every slot is taken, each backend gets its share give or take one, and
// the table depends on the names and the seed only.
func TestMaglevFillsEvenly(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 100} {
		for _, m := range []int{251, 16381} {
			names := backendNames(n)
			table := Maglev(names, m, 42)
			count := make([]int, n)
			for _, b := range table {
				count[b]++
			}
			lo, hi := slices.Min(count), slices.Max(count)
			if len(table) != m || hi-lo > 1 {
				t.Errorf("n=%d m=%d: %d slots, backends hold %d to %d", n, m, len(table), lo, hi)
			}
			// Another node lists the backends in another order.
			rev := slices.Clone(names)
			slices.Reverse(rev)
			again := Maglev(rev, m, 42)
			for i := range table {
				if names[table[i]] != rev[again[i]] {
					t.Fatalf("n=%d m=%d: slot %d is %s, in the other order %s", n, m, i, names[table[i]], rev[again[i]])
				}
			}
		}
	}
	if Maglev(nil, 251, 0) != nil {
		t.Error("a table without backends")
	}
	names := backendNames(10)
	if slices.Equal(Maglev(names, 251, 1), Maglev(names, 251, 2)) {
		t.Error("the seed changes nothing")
	}
}

// A backend that goes moves its own slots and few others: at most about
// 1/N of the flows move. (The paper's bound is looser; this checks what
// the tables here do, with a margin.)
func TestMaglevDisruption(t *testing.T) {
	const m = 16381
	for _, n := range []int{3, 10, 50} {
		names := backendNames(n)
		before := Maglev(names, m, 7)
		gone := n / 2
		after := Maglev(slices.Delete(slices.Clone(names), gone, gone+1), m, 7)
		left := slices.Delete(slices.Clone(names), gone, gone+1)
		moved := 0
		for i := range before {
			if names[before[i]] != left[after[i]] {
				moved++
			}
		}
		frac, ideal := float64(moved)/m, 1/float64(n)
		t.Logf("n=%d: %.4f of the slots moved, ideal %.4f", n, frac, ideal)
		if frac > ideal*1.3+0.01 {
			t.Errorf("n=%d: %.4f of the slots moved when one of %d backends went, want about %.4f", n, frac, n, ideal)
		}
	}
}

func TestValidMaglevTableSize(t *testing.T) {
	if ValidMaglevTableSize(16381) != nil || ValidMaglevTableSize(16384) == nil {
		t.Fatal("16381 is a size, 16384 is not")
	}
}

// The Maglev flags: bad values name the flag and what it wants; the
// default seed is Cilium's, decoded as 8 bytes for the tables and 4 for
// the flow hash.
func TestMaglevConfig(t *testing.T) {
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.BPFLBAlgorithm = "hash" }, `--bpf-lb-algorithm "hash"`},
		{func(c *Config) { c.BPFLBMaglevTableSize = 16384 }, "--bpf-lb-maglev-table-size 16384"},
		{func(c *Config) { c.BPFLBMaglevHashSeed = "short" }, `--bpf-lb-maglev-hash-seed "short"`},
		{func(c *Config) { c.BPFLBMaglevHashSeed = "AAAAAAAAAAAAAAAAAAAAAAAA" }, "--bpf-lb-maglev-hash-seed"},
	} {
		c := DefaultConfig
		tc.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
	}
	if err := DefaultConfig.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := DefaultConfig.MaglevSeeds()
	if err != nil || s.Table != 0x24b7ef8271dcda46 || s.Flow != 0x92505688 {
		t.Fatalf("seeds %#x %#x (%v)", s.Table, s.Flow, err)
	}
}
