package loadbalancer

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
)

// MaglevTableSizes are the sizes a Maglev table may have
// (--bpf-lb-maglev-table-size), Cilium's: primes, so that every backend's
// skip walks all of the table's slots.
var MaglevTableSizes = []int{251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521, 131071}

// ValidMaglevTableSize says whether m is one of MaglevTableSizes.
func ValidMaglevTableSize(m int) error {
	if !slices.Contains(MaglevTableSizes, m) {
		return fmt.Errorf("--bpf-lb-maglev-table-size %d: want one of %v", m, MaglevTableSizes)
	}
	return nil
}

// Maglev fills a lookup table of m slots (a prime) with indexes into
// names, by the Maglev paper's population (Eisenbud et al., NSDI 2016):
// each backend has its own permutation of the slots, from an offset and a
// skip that hashes of its name give, and the backends take turns, each
// claiming the next slot of its permutation that is still free, until all
// are taken. Every backend gets m/n slots, give or take one, and a backend
// that comes or goes moves little more than its own share of the slots.
// names must name the backends alike on every node (their address, port
// and protocol), and seed be the cluster's, so that every node computes
// the same table and sends a flow to the same backend. No names: nil.
func Maglev(names []string, m int, seed uint64) []int {
	n := len(names)
	if n == 0 || m < 2 {
		return nil
	}
	offset := make([]uint64, n)
	skip := make([]uint64, n)
	for i, name := range names {
		offset[i] = maglevHash(name, seed, 0) % uint64(m)
		skip[i] = maglevHash(name, seed, 1)%uint64(m-1) + 1
	}
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	next := make([]uint64, n) // each backend's position in its permutation
	for filled := 0; ; {
		for i := range n {
			c := (offset[i] + next[i]*skip[i]) % uint64(m)
			for table[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % uint64(m)
			}
			table[c] = i
			next[i]++
			if filled++; filled == m {
				return table
			}
		}
	}
}

// maglevHash is the 64-bit FNV-1a hash of the seed, which (0: offset, 1:
// skip) and name.
func maglevHash(name string, seed uint64, which byte) uint64 {
	h := fnv.New64a()
	var b [9]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	b[8] = which
	h.Write(b[:])
	h.Write([]byte(name))
	return h.Sum64()
}
