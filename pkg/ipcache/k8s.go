package ipcache

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// MergeNodes merges Nodes and CiliumNodes by name, sorted by name, and
// leaves out those without an IPv4 address; self is this node's name. The
// Node's InternalIP wins; the pod CIDR is the CiliumNode's when the
// operator's cluster-pool IPAM wrote one (that is the pool the node's
// agent allocates from), else the Node's.
func MergeNodes(self string, nodes []*corev1.Node, ciliumNodes []*v2.CiliumNode) []Node {
	byName := map[string]*Node{}
	get := func(name string) *Node {
		if byName[name] == nil {
			byName[name] = &Node{Name: name, Self: name == self}
		}
		return byName[name]
	}
	for _, n := range nodes {
		a := get(n.Name)
		for _, addr := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(addr.Address); err == nil && ip.Is4() &&
				addr.Type == corev1.NodeInternalIP && !a.IPv4.IsValid() {
				a.IPv4 = ip
			}
		}
		a.PodCIDR = firstIPv4Prefix(append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...))
	}
	for _, n := range ciliumNodes {
		a := get(n.Name)
		for _, addr := range n.Spec.Addresses {
			if ip, err := netip.ParseAddr(addr.IP); err == nil && ip.Is4() &&
				addr.Type == v2.NodeInternalIP && !a.IPv4.IsValid() {
				a.IPv4 = ip
			}
		}
		if p := CiliumNodePodCIDR(n); p.IsValid() {
			a.PodCIDR = p
		}
		if ip, err := netip.ParseAddr(n.Spec.HealthAddressing.IPv4); err == nil && ip.Is4() {
			a.HealthIPv4 = ip
		}
	}
	out := make([]Node, 0, len(byName))
	for _, a := range byName {
		if a.IPv4.IsValid() {
			out = append(out, *a)
		}
	}
	sortNodes(out)
	return out
}

// sortNodes sorts nodes by name, the order in which a later node's word
// on an address wins over an earlier's.
func sortNodes(nodes []Node) {
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
}

// CiliumNodePodCIDR is the first IPv4 CIDR of the CiliumNode's
// spec.ipam.podCIDRs, invalid when it has none.
func CiliumNodePodCIDR(n *v2.CiliumNode) netip.Prefix {
	return firstIPv4Prefix(n.Spec.IPAM.PodCIDRs)
}

func firstIPv4Prefix(ss []string) netip.Prefix {
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Masked()
		}
	}
	return netip.Prefix{}
}

// RemoteEndpointOf reads the IPv4 address, node and identity of a
// CiliumEndpoint; ok is false when it lacks any of them.
func RemoteEndpointOf(cep *v2.CiliumEndpoint) (ep RemoteEndpoint, ok bool) {
	s := cep.Status
	if s.Identity == nil || s.Identity.ID <= 0 || s.Identity.ID > 1<<32-1 || s.Networking == nil {
		return ep, false
	}
	node, err := netip.ParseAddr(s.Networking.NodeIP)
	if err != nil || !node.Is4() {
		return ep, false
	}
	for _, pair := range s.Networking.Addressing {
		if pair == nil {
			continue
		}
		if a, err := netip.ParseAddr(pair.IPV4); err == nil && a.Is4() {
			return RemoteEndpoint{IP: a, Node: node, Identity: identity.NumericIdentity(s.Identity.ID)}, true
		}
	}
	return ep, false
}
