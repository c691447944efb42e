package agent

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// Cluster is what the ipcache is computed from: this node's endpoints and
// what the watchers hold about the rest of the cluster.
type Cluster struct {
	// NodeName is this node.
	NodeName        string
	Local           []endpoint.Endpoint
	CiliumEndpoints []*v2.CiliumEndpoint
	Nodes           []*corev1.Node
	CiliumNodes     []*v2.CiliumNode
}

// A node as the ipcache and the routes need it.
type nodeAddr struct {
	name    string
	ipv4    netip.Addr
	podCIDR netip.Prefix
}

// DesiredIPCache is the ipcache the datapath should hold for c. When two
// sources name the same address, the more trusted wins: a local endpoint
// over a node, a node over a CiliumEndpoint (which any pod's namespace
// can hold and so must not take over a node's address).
func DesiredIPCache(c Cluster) map[netip.Prefix]spec.IPCacheEntry {
	out := map[netip.Prefix]spec.IPCacheEntry{}
	self := map[netip.Addr]bool{}
	for _, n := range nodeAddrs(c) {
		if n.name == c.NodeName {
			self[n.ipv4] = true
		}
	}
	for _, cep := range c.CiliumEndpoints {
		ip, node, num, ok := RemoteEndpoint(cep)
		if !ok || self[node] {
			// Our own CiliumEndpoints: the local endpoints are the truth.
			continue
		}
		out[netip.PrefixFrom(ip, 32)] = spec.IPCacheEntry{Identity: identity.NumericIdentity(num), TunnelEndpoint: node}
	}
	for _, n := range nodeAddrs(c) {
		num := uint32(identity.RemoteNode)
		if n.name == c.NodeName {
			num = uint32(identity.Host)
		}
		out[netip.PrefixFrom(n.ipv4, 32)] = spec.IPCacheEntry{Identity: identity.NumericIdentity(num)}
	}
	for _, ep := range c.Local {
		if ep.IPv4.Is4() {
			out[netip.PrefixFrom(ep.IPv4, 32)] = spec.IPCacheEntry{Identity: ep.Identity}
		}
	}
	return out
}

// RemoteNodes are the other nodes with a pod CIDR, for routes to their pods.
func RemoteNodes(c Cluster) []spec.RemoteNode {
	var out []spec.RemoteNode
	for _, n := range nodeAddrs(c) {
		if n.name != c.NodeName && n.podCIDR.IsValid() {
			out = append(out, spec.RemoteNode{IPv4: n.ipv4, PodCIDR: n.podCIDR})
		}
	}
	return out
}

// NodeIPv4 is the IPv4 address of the named node, if the watchers know it.
func NodeIPv4(c Cluster, name string) (netip.Addr, bool) {
	for _, n := range nodeAddrs(c) {
		if n.name == name {
			return n.ipv4, true
		}
	}
	return netip.Addr{}, false
}

// nodeAddrs merges Nodes and CiliumNodes by name, sorted by name. The
// Node's InternalIP wins; the pod CIDR is the CiliumNode's when the
// operator's cluster-pool IPAM wrote one (that is the pool the node's
// agent allocates from), else the Node's.
func nodeAddrs(c Cluster) []nodeAddr {
	byName := map[string]*nodeAddr{}
	get := func(name string) *nodeAddr {
		if byName[name] == nil {
			byName[name] = &nodeAddr{name: name}
		}
		return byName[name]
	}
	for _, n := range c.Nodes {
		a := get(n.Name)
		for _, addr := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(addr.Address); err == nil && ip.Is4() &&
				addr.Type == corev1.NodeInternalIP && !a.ipv4.IsValid() {
				a.ipv4 = ip
			}
		}
		a.podCIDR = firstIPv4Prefix(append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...))
	}
	for _, n := range c.CiliumNodes {
		a := get(n.Name)
		for _, addr := range n.Spec.Addresses {
			if ip, err := netip.ParseAddr(addr.IP); err == nil && ip.Is4() &&
				addr.Type == v2.NodeInternalIP && !a.ipv4.IsValid() {
				a.ipv4 = ip
			}
		}
		if p := firstIPv4Prefix(n.Spec.IPAM.PodCIDRs); p.IsValid() {
			a.podCIDR = p
		}
	}
	out := make([]nodeAddr, 0, len(byName))
	for _, a := range byName {
		if a.ipv4.IsValid() {
			out = append(out, *a)
		}
	}
	slices.SortFunc(out, func(a, b nodeAddr) int { return cmp.Compare(a.name, b.name) })
	return out
}

func firstIPv4Prefix(ss []string) netip.Prefix {
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Masked()
		}
	}
	return netip.Prefix{}
}

// RemoteEndpoint reads the IPv4 address, node and identity of a
// CiliumEndpoint; ok is false when it lacks any of them.
func RemoteEndpoint(cep *v2.CiliumEndpoint) (ip, node netip.Addr, num uint32, ok bool) {
	s := cep.Status
	if s.Identity == nil || s.Identity.ID <= 0 || s.Identity.ID > 1<<32-1 || s.Networking == nil {
		return ip, node, 0, false
	}
	node, err := netip.ParseAddr(s.Networking.NodeIP)
	if err != nil || !node.Is4() {
		return ip, node, 0, false
	}
	for _, pair := range s.Networking.Addressing {
		if pair == nil {
			continue
		}
		if a, err := netip.ParseAddr(pair.IPV4); err == nil && a.Is4() {
			return a, node, uint32(s.Identity.ID), true
		}
	}
	return ip, node, 0, false
}
