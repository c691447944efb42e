package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// MaglevTableSize is the number of slots of the Maglev tables.
func (m *Maps) MaglevTableSize() int { return int(m.maglevSize) }

// upsertMaglev makes idx's Maglev table hold table: a new inner map
// replaces the old one whole, so that a packet reads one or the other.
// A table that holds it already is left alone.
func (m *Maps) upsertMaglev(idx uint16, table []spec.BackendID) error {
	if len(table) != int(m.maglevSize) {
		return fmt.Errorf("maglev table of reverse NAT index %d: %d slots, the maps' tables have %d",
			idx, len(table), m.maglevSize)
	}
	want := make([]byte, 4*len(table))
	for i, id := range table {
		binary.NativeEndian.PutUint32(want[4*i:], uint32(id))
	}
	if have, err := m.maglevBytes(idx); err == nil && string(have) == string(want) {
		return nil
	}
	inner, err := ebpf.NewMap(m.maglevInner)
	if err != nil {
		return fmt.Errorf("maglev table of reverse NAT index %d: %w", idx, err)
	}
	defer inner.Close()
	if err := inner.Put(uint32(0), want); err != nil {
		return fmt.Errorf("maglev table of reverse NAT index %d: %w", idx, err)
	}
	if err := m.LB4Maglev.Put(idx, inner); err != nil {
		return fmt.Errorf("put maglev table of reverse NAT index %d: %w", idx, markFull(err))
	}
	return nil
}

// DeleteMaglev removes the Maglev table of reverse NAT index idx; a
// missing one is no error.
func (m *Maps) DeleteMaglev(idx uint16) error {
	if err := m.LB4Maglev.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete maglev table of reverse NAT index %d: %w", idx, err)
	}
	return nil
}

// maglevBytes reads idx's table as the datapath holds it.
func (m *Maps) maglevBytes(idx uint16) ([]byte, error) {
	var inner *ebpf.Map
	if err := m.LB4Maglev.Lookup(idx, &inner); err != nil {
		return nil, err
	}
	defer inner.Close()
	var b []byte
	if err := inner.Lookup(uint32(0), &b); err != nil {
		return nil, err
	}
	return b, nil
}

// MaglevTable reads the Maglev table of the frontend with reverse NAT
// index idx; ok is false when it has none.
func (m *Maps) MaglevTable(idx uint16) (table []spec.BackendID, ok bool, err error) {
	b, err := m.maglevBytes(idx)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("maglev table of reverse NAT index %d: %w", idx, err)
	}
	table = make([]spec.BackendID, len(b)/4)
	for i := range table {
		table[i] = spec.BackendID(binary.NativeEndian.Uint32(b[4*i:]))
	}
	return table, true, nil
}

// MaglevIndexes lists the reverse NAT indexes that have a Maglev table.
func (m *Maps) MaglevIndexes() ([]uint16, error) {
	var out []uint16
	var k uint16
	var v uint32 // the inner map's id
	it := m.LB4Maglev.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate maglev tables: %w", err)
	}
	return out, nil
}
