package ipcache

import (
	"net/netip"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/node"
)

// clusterIndex holds the ipcache's inputs by the addresses they name, so
// that a change recomputes the entries of the addresses it touches and no
// others. Its setters mark those entries' prefixes dirty; entry computes
// one by DesiredIPCache's rules. It is owned by one goroutine.
type clusterIndex struct {
	// at are the endpoints that name each address.
	at map[netip.Addr]*candidates
	// local and remote are each endpoint as last set, by endpoint ID and
	// by CiliumEndpoint key, for the address a change moves it from.
	local  map[uint16]localEndpoint
	remote map[string]RemoteEndpoint
	// behind are the keys of the CiliumEndpoints published from each node
	// address: a node that comes, goes or moves changes whether they are
	// trusted.
	behind map[netip.Addr]map[string]struct{}
	nodes  map[string]node.Node // by name
	view   nodeView             // of nodes
	// inCluster and world are the policy prefixes (masked, IPv4) and
	// their CIDR identities.
	inCluster, world map[netip.Prefix]identity.NumericIdentity
	dirty            map[netip.Prefix]struct{}
}

// candidates are what names one address: this node's endpoints by ID
// and other nodes' endpoints by CiliumEndpoint key.
type candidates struct {
	local  map[uint16]identity.NumericIdentity
	remote map[string]RemoteEndpoint
}

// localEndpoint is what the ipcache reads of a local endpoint.
type localEndpoint struct {
	IPv4     netip.Addr
	Identity identity.NumericIdentity
}

func newClusterIndex() *clusterIndex {
	return &clusterIndex{at: map[netip.Addr]*candidates{}, local: map[uint16]localEndpoint{},
		remote: map[string]RemoteEndpoint{}, behind: map[netip.Addr]map[string]struct{}{},
		nodes: map[string]node.Node{}, view: newNodeView(nil),
		inCluster: map[netip.Prefix]identity.NumericIdentity{}, world: map[netip.Prefix]identity.NumericIdentity{},
		dirty: map[netip.Prefix]struct{}{}}
}

// markAddr marks a's entry dirty.
func (x *clusterIndex) markAddr(a netip.Addr) {
	if a.Is4() {
		x.dirty[netip.PrefixFrom(a, 32)] = struct{}{}
	}
}

// candidatesAt are a's candidates, created when create is set.
func (x *clusterIndex) candidatesAt(a netip.Addr, create bool) *candidates {
	c := x.at[a]
	if c == nil && create {
		c = &candidates{local: map[uint16]identity.NumericIdentity{}, remote: map[string]RemoteEndpoint{}}
		x.at[a] = c
	}
	return c
}

// forget drops a's candidates once none is left.
func (x *clusterIndex) forget(a netip.Addr) {
	if c := x.at[a]; c != nil && len(c.local) == 0 && len(c.remote) == 0 {
		delete(x.at, a)
	}
}

// setLocal sets the local endpoint id, or deletes it (ok false).
func (x *clusterIndex) setLocal(id uint16, ep localEndpoint, ok bool) {
	old, had := x.local[id]
	if (!had && !ok) || (had && ok && old == ep) {
		return
	}
	if had {
		delete(x.local, id)
		if c := x.candidatesAt(old.IPv4, false); c != nil {
			delete(c.local, id)
			x.forget(old.IPv4)
		}
		x.markAddr(old.IPv4)
	}
	if ok {
		x.local[id] = ep
		x.candidatesAt(ep.IPv4, true).local[id] = ep.Identity
		x.markAddr(ep.IPv4)
	}
}

// setRemote sets the endpoint that the CiliumEndpoint key publishes, or
// deletes it (ok false: gone, or it names no address, node or identity).
func (x *clusterIndex) setRemote(key string, ep RemoteEndpoint, ok bool) {
	old, had := x.remote[key]
	if (!had && !ok) || (had && ok && old == ep) {
		return
	}
	if had {
		delete(x.remote, key)
		if c := x.candidatesAt(old.IP, false); c != nil {
			delete(c.remote, key)
			x.forget(old.IP)
		}
		delete(x.behind[old.Node], key)
		if len(x.behind[old.Node]) == 0 {
			delete(x.behind, old.Node)
		}
		x.markAddr(old.IP)
	}
	if ok {
		x.remote[key] = ep
		x.candidatesAt(ep.IP, true).remote[key] = ep
		if x.behind[ep.Node] == nil {
			x.behind[ep.Node] = map[string]struct{}{}
		}
		x.behind[ep.Node][key] = struct{}{}
		x.markAddr(ep.IP)
	}
}

// setNode sets the node name to n, or deletes it (ok false). A node
// decides the entries of its address and its health endpoint, whether
// the endpoints published from its address are trusted, and which node
// the addresses in its pod CIDR belong to: those are marked dirty, for
// the node as it was and as it is. It tells whether the node changed.
func (x *clusterIndex) setNode(name string, n node.Node, ok bool) bool {
	old, had := x.nodes[name]
	if (!had && !ok) || (had && ok && old == n) {
		return false
	}
	if had {
		delete(x.nodes, name)
		x.markNode(old)
	}
	if ok {
		x.nodes[name] = n
		x.markNode(n)
	}
	x.view = newNodeView(x.nodes)
	return true
}

func (x *clusterIndex) markNode(n node.Node) {
	x.markAddr(n.IPv4)
	x.markAddr(n.HealthIPv4)
	for key := range x.behind[n.IPv4] {
		x.markAddr(x.remote[key].IP)
	}
	if n.PodCIDR.IsValid() {
		x.markUnder(n.PodCIDR)
	}
}

// markUnder marks dirty the entries of every address in p that an
// endpoint or a node names. It walks every such address: prefixes change
// seldom, endpoints often.
func (x *clusterIndex) markUnder(p netip.Prefix) {
	for a := range x.at {
		if p.Contains(a) {
			x.markAddr(a)
		}
	}
	for a := range x.view.byIP {
		if p.Contains(a) {
			x.markAddr(a)
		}
	}
	for a := range x.view.health {
		if p.Contains(a) {
			x.markAddr(a)
		}
	}
}

// setPrefix sets a policy prefix, or deletes it (ok false). An in-cluster
// prefix gives the addresses in it their CIDR identity; a world prefix is
// an entry of its own.
func (x *clusterIndex) setPrefix(k PrefixKey, id identity.NumericIdentity, ok bool) {
	p := k.Prefix.Masked()
	if !p.Addr().Is4() {
		return
	}
	m := x.world
	if k.InCluster {
		m = x.inCluster
	}
	if old, had := m[p]; (!had && !ok) || (had && ok && old == id) {
		return
	}
	if ok {
		m[p] = id
	} else {
		delete(m, p)
	}
	if k.InCluster {
		x.markUnder(p)
	} else {
		x.dirty[p] = struct{}{}
	}
}

// clearDirty forgets the dirty prefixes, once their entries are written.
func (x *clusterIndex) clearDirty() {
	x.dirty = map[netip.Prefix]struct{}{}
}

// entry is the desired entry of p, as DesiredIPCache has it for the
// inputs the index holds: a pod's or node's address with the CIDR
// identity of the most specific in-cluster prefix holding it, else a
// world prefix.
func (x *clusterIndex) entry(p netip.Prefix) (spec.IPCacheEntry, bool) {
	if p.Bits() == 32 && p.Addr().Is4() {
		if e, ok := addressEntry(p.Addr(), x.at[p.Addr()], &x.view); ok {
			e.CIDRIdentity = inClusterIdentity(p, x.inCluster)
			return e, true
		}
	}
	if id, ok := x.world[p]; ok {
		return spec.IPCacheEntry{Identity: id}, true
	}
	return spec.IPCacheEntry{}, false
}

// addressEntry is the entry of address a, from its candidates (nil when
// none) and the nodes: a local endpoint over a node, a node over its
// health endpoint, that over a remote endpoint, and a remote endpoint
// only when v trusts it. Among equals the last wins, in the order
// DesiredIPCache reads them: local endpoints by ID, nodes by name,
// CiliumEndpoints by key.
func addressEntry(a netip.Addr, c *candidates, v *nodeView) (spec.IPCacheEntry, bool) {
	if c != nil && len(c.local) > 0 {
		last := -1
		for id := range c.local {
			last = max(last, int(id))
		}
		return spec.IPCacheEntry{Identity: c.local[uint16(last)]}, true
	}
	if n, ok := v.byIP[a]; ok {
		if n.Self {
			return spec.IPCacheEntry{Identity: identity.Host}, true
		}
		return spec.IPCacheEntry{Identity: identity.RemoteNode}, true
	}
	if n, ok := v.health[a]; ok {
		return spec.IPCacheEntry{Identity: identity.Health, TunnelEndpoint: n.IPv4}, true
	}
	if c == nil {
		return spec.IPCacheEntry{}, false
	}
	var (
		last  string
		found bool
	)
	for key, ep := range c.remote {
		if v.trusts(ep) && (!found || key > last) {
			last, found = key, true
		}
	}
	if !found {
		return spec.IPCacheEntry{}, false
	}
	ep := c.remote[last]
	return spec.IPCacheEntry{Identity: ep.Identity, TunnelEndpoint: ep.Node}, true
}

// inClusterIdentity is the CIDR identity of the most specific in-cluster
// prefix holding p, zero when none does.
func inClusterIdentity(p netip.Prefix, inCluster map[netip.Prefix]identity.NumericIdentity) identity.NumericIdentity {
	if len(inCluster) == 0 {
		return 0
	}
	for bits := p.Bits(); bits >= 0; bits-- {
		if id, ok := inCluster[netip.PrefixFrom(p.Addr(), bits).Masked()]; ok {
			return id
		}
	}
	return 0
}

// nodeView is what the entries read of the nodes, computed once each
// time a node changes.
type nodeView struct {
	sorted []node.Node // by name
	// self and remote are the addresses of this node and of the others.
	self, remote map[netip.Addr]bool
	// byIP and health are the node that takes each node address and each
	// health endpoint address: the last by name.
	byIP, health map[netip.Addr]node.Node
}

func newNodeView(nodes map[string]node.Node) nodeView {
	v := nodeView{self: map[netip.Addr]bool{}, remote: map[netip.Addr]bool{},
		byIP: map[netip.Addr]node.Node{}, health: map[netip.Addr]node.Node{}}
	for _, n := range nodes {
		v.sorted = append(v.sorted, n)
	}
	sortNodes(v.sorted)
	for _, n := range v.sorted {
		if n.Self {
			v.self[n.IPv4] = true
		} else {
			v.remote[n.IPv4] = true
		}
		if n.IPv4.Is4() {
			v.byIP[n.IPv4] = n
		}
		// Taken only in the node's own pod CIDR, where no other node's
		// object can place it.
		if !n.Self && n.IPv4.Is4() && n.HealthIPv4.Is4() && n.PodCIDR.Contains(n.HealthIPv4) {
			v.health[n.HealthIPv4] = n
		}
	}
	return v
}

// trusts tells whether a remote endpoint counts: published from another
// node of the cluster, and not in a different node's pod CIDR.
func (v *nodeView) trusts(ep RemoteEndpoint) bool {
	if !ep.IP.Is4() || !v.remote[ep.Node] || v.self[ep.Node] {
		return false
	}
	owner, ok := podCIDROwner(v.sorted, ep.IP)
	return !ok || owner == ep.Node
}
