package loadbalancer

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium-go/cilium/internal/datapath/spec"
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
// the same table and sends a flow to the same backend; the backends take
// their turns in name order, so the order of names changes nothing. No
// names: nil.
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
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	next := make([]uint64, n) // each backend's position in its permutation
	for filled := 0; ; {
		for _, i := range order {
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

// MaglevTable is the Maglev table of m slots over backends, by their ids:
// each backend is named by its address, port and protocol, which every
// node gives it alike (its id is the node's own). No backends: nil.
func MaglevTable(backends []spec.Backend, m int, seed uint64) []spec.BackendID {
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = netip.AddrPortFrom(b.Address, b.Port).String() + "/" + spec.ProtocolName(b.Protocol)
	}
	idx := Maglev(names, m, seed)
	if idx == nil {
		return nil
	}
	out := make([]spec.BackendID, m)
	for i, j := range idx {
		out[i] = backends[j].ID
	}
	return out
}
