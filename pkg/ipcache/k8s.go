package ipcache

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/node"
)

// sortNodes sorts nodes by name, the order in which a later node's word
// on an address wins over an earlier's.
func sortNodes(nodes []node.Node) {
	slices.SortFunc(nodes, func(a, b node.Node) int { return cmp.Compare(a.Name, b.Name) })
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
