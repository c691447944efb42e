package loadbalancer

import (
	"fmt"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// ids hands out the numbers the datapath names backends and reverse
// translations by. A number freed is not handed out again until the
// counter comes round: connections of a removed backend may still carry
// its id in conntrack, and must not reach whichever backend took it next.
// After a restart, the numbers the maps hold are taken over, so that
// established connections keep theirs.
type ids struct {
	backends    map[Addr]spec.BackendID
	backendUsed map[spec.BackendID]bool
	nextBackend spec.BackendID

	revNATs    map[Addr]uint16
	revNATUsed map[uint16]bool
	nextRevNAT uint16
}

func newIDs() *ids {
	return &ids{backends: map[Addr]spec.BackendID{}, backendUsed: map[spec.BackendID]bool{}, nextBackend: 1,
		revNATs: map[Addr]uint16{}, revNATUsed: map[uint16]bool{}, nextRevNAT: 1}
}

// restore takes over the numbers the datapath holds.
func (i *ids) restore(m Map) error {
	backends, err := m.Backends()
	if err != nil {
		return err
	}
	for id, b := range backends {
		i.takeBackend(Addr{Address: b.Address, Port: b.Port, Protocol: b.Protocol}, id)
	}
	services, err := m.Services()
	if err != nil {
		return err
	}
	for _, s := range services {
		i.takeRevNAT(Addr{Address: s.Frontend.Address, Port: s.Frontend.Port, Protocol: s.Frontend.Protocol}, s.RevNATIndex)
	}
	return nil
}

func (i *ids) takeBackend(a Addr, id spec.BackendID) {
	if _, ok := i.backends[a]; ok || i.backendUsed[id] || id == 0 {
		return
	}
	i.backends[a] = id
	i.backendUsed[id] = true
	if id >= i.nextBackend {
		i.nextBackend = id + 1
	}
}

func (i *ids) takeRevNAT(a Addr, idx uint16) {
	if _, ok := i.revNATs[a]; ok || i.revNATUsed[idx] || idx == 0 {
		return
	}
	i.revNATs[a] = idx
	i.revNATUsed[idx] = true
	if idx >= i.nextRevNAT {
		i.nextRevNAT = idx + 1
	}
}

// backend returns a's id, giving it one when it has none.
func (i *ids) backend(a Addr) (spec.BackendID, error) {
	if id, ok := i.backends[a]; ok {
		return id, nil
	}
	for range len(i.backendUsed) + 1 {
		id := i.nextBackend
		i.nextBackend++
		if i.nextBackend == 0 {
			i.nextBackend = 1
		}
		if id != 0 && !i.backendUsed[id] {
			i.backends[a] = id
			i.backendUsed[id] = true
			return id, nil
		}
	}
	return 0, fmt.Errorf("backend %s: no backend id left", a)
}

func (i *ids) releaseBackend(a Addr) {
	if id, ok := i.backends[a]; ok {
		delete(i.backends, a)
		delete(i.backendUsed, id)
	}
}

// revNAT returns frontend a's reverse translation index, giving it one
// when it has none.
func (i *ids) revNAT(a Addr) (uint16, error) {
	if idx, ok := i.revNATs[a]; ok {
		return idx, nil
	}
	for range 1 << 16 {
		idx := i.nextRevNAT
		i.nextRevNAT++
		if idx != 0 && !i.revNATUsed[idx] {
			i.revNATs[a] = idx
			i.revNATUsed[idx] = true
			return idx, nil
		}
	}
	return 0, fmt.Errorf("frontend %s: all 65535 reverse NAT indexes are in use", a)
}

func (i *ids) releaseRevNAT(a Addr) {
	if idx, ok := i.revNATs[a]; ok {
		delete(i.revNATs, a)
		delete(i.revNATUsed, idx)
	}
}
