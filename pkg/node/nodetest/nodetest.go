// Package nodetest keeps routes to remote nodes in memory, for tests that
// have no kernel.
package nodetest

import (
	"maps"
	"net/netip"
	"sync"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Routes are routes by destination pod CIDR, as the kernel keeps them (a
// node.Routes).
type Routes struct {
	mu     sync.Mutex
	routes map[netip.Prefix]netip.Addr
}

// New returns routes holding the given ones: pod CIDR to node address.
func New(routes map[netip.Prefix]netip.Addr) *Routes {
	r := &Routes{routes: maps.Clone(routes)}
	if r.routes == nil {
		r.routes = map[netip.Prefix]netip.Addr{}
	}
	return r
}

// Routes is a copy of the routes: pod CIDR to node address.
func (m *Routes) Routes() map[netip.Prefix]netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.routes)
}

func (m *Routes) UpsertRemoteNode(r spec.RemoteNode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes[r.PodCIDR] = r.IPv4
	return nil
}

func (m *Routes) DeleteRemoteNode(r spec.RemoteNode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.routes, r.PodCIDR)
	return nil
}

func (m *Routes) RemoteNodes() ([]spec.RemoteNode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []spec.RemoteNode
	for p, a := range m.routes {
		out = append(out, spec.RemoteNode{IPv4: a, PodCIDR: p})
	}
	return out, nil
}
