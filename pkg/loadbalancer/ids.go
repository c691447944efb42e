package loadbalancer

import (
	"fmt"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// ids hands out the numbers the datapath names backends and reverse
// translations by. After a restart, the numbers the maps hold are taken
// over, so that established connections keep theirs.
type ids struct {
	backends pool[spec.BackendID]
	revNATs  pool[uint16]
}

func newIDs() *ids {
	return &ids{backends: newPool[spec.BackendID](), revNATs: newPool[uint16]()}
}

// restore takes over the numbers the datapath holds.
func (i *ids) restore(m Map) error {
	backends, err := m.Backends()
	if err != nil {
		return err
	}
	for id, b := range backends {
		i.backends.take(Addr{Address: b.Address, Port: b.Port, Protocol: b.Protocol}, id)
	}
	services, err := m.Services()
	if err != nil {
		return err
	}
	for _, s := range services {
		i.revNATs.take(Addr{Address: s.Frontend.Address, Port: s.Frontend.Port, Protocol: s.Frontend.Protocol}, s.RevNATIndex)
	}
	return nil
}

// pool gives each Addr a number of its own. A number freed is not handed
// out again until the counter comes round: connections of a removed
// backend may still carry its id in conntrack, and must not reach
// whichever backend took it next. 0 is never handed out.
type pool[N spec.BackendID | uint16] struct {
	byAddr map[Addr]N
	used   map[N]bool
	next   N
}

func newPool[N spec.BackendID | uint16]() pool[N] {
	return pool[N]{byAddr: map[Addr]N{}, used: map[N]bool{}, next: 1}
}

// take gives a the number n, unless either is taken.
func (p *pool[N]) take(a Addr, n N) {
	if _, ok := p.byAddr[a]; ok || p.used[n] || n == 0 {
		return
	}
	p.byAddr[a] = n
	p.used[n] = true
	if n >= p.next {
		p.next = n + 1
	}
}

// get returns a's number, giving it one when it has none.
func (p *pool[N]) get(a Addr) (N, error) {
	if n, ok := p.byAddr[a]; ok {
		return n, nil
	}
	// Among len(used)+2 numbers in a row, at most one of them 0, one is free.
	for range len(p.used) + 2 {
		n := p.next
		p.next++
		if n != 0 && !p.used[n] {
			p.byAddr[a] = n
			p.used[n] = true
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s: no number left", a)
}

// release frees a's number.
func (p *pool[N]) release(a Addr) {
	if n, ok := p.byAddr[a]; ok {
		delete(p.byAddr, a)
		delete(p.used, n)
	}
}
