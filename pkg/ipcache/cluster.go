package ipcache

import (
	"net/netip"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/node"
)

// Cluster is what the ipcache is computed from: this node's endpoints,
// what the Kubernetes objects tell of the rest (translated by MergeNodes
// and RemoteEndpointOf), and the prefixes that policy rules name.
type Cluster struct {
	Local  []endpoint.Endpoint
	Remote []RemoteEndpoint
	Nodes  []node.Node // sorted by name
	// Prefixes are the prefixes that policy rules name.
	Prefixes []PolicyPrefixRow
}

// PolicyPrefixRow is a prefix that policy rules name, with its CIDR
// identity: for the addresses of the world in it, or (InCluster) the
// identity that pods' and nodes' addresses in it carry beside their own,
// for NetworkPolicy's ipBlock.
type PolicyPrefixRow struct {
	Prefix    netip.Prefix
	Identity  identity.NumericIdentity
	InCluster bool
}

// RemoteEndpoint is an endpoint that another node published.
type RemoteEndpoint struct {
	IP       netip.Addr
	Node     netip.Addr // the node that published it
	Identity identity.NumericIdentity
}

// DesiredIPCache is the ipcache the datapath should hold for c: the
// specification that the controller's incremental computation (index)
// follows, address by address, and is tested against. When two
// sources name the same address, the more trusted wins: a local endpoint
// over a node, a node over a remote endpoint (which is only as trusted as
// whoever wrote its object, and so must not take over a node's address).
// A remote endpoint is left out unless it is behind a node of the cluster
// (else traffic to it would tunnel to any address its object names), and
// when its address is in another node's pod CIDR: that belongs to the
// other node. A node's health endpoint counts as the node's word.
func DesiredIPCache(c Cluster) map[netip.Prefix]spec.IPCacheEntry {
	out := map[netip.Prefix]spec.IPCacheEntry{}
	self, remote := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, n := range c.Nodes {
		if n.Self {
			self[n.IPv4] = true
		} else {
			remote[n.IPv4] = true
		}
	}
	for _, ep := range c.Remote {
		if !ep.IP.Is4() || !remote[ep.Node] || self[ep.Node] {
			// Published from here (the local endpoints are the truth), or
			// from no node.
			continue
		}
		if owner, ok := podCIDROwner(c.Nodes, ep.IP); ok && owner != ep.Node {
			continue
		}
		out[netip.PrefixFrom(ep.IP, 32)] = spec.IPCacheEntry{Identity: ep.Identity, TunnelEndpoint: ep.Node}
	}
	// A node's health endpoint, from its CiliumNode: taken only in the
	// node's own pod CIDR, where no other node's object can place it.
	for _, n := range c.Nodes {
		if !n.Self && n.IPv4.Is4() && n.HealthIPv4.Is4() && n.PodCIDR.Contains(n.HealthIPv4) {
			out[netip.PrefixFrom(n.HealthIPv4, 32)] = spec.IPCacheEntry{Identity: identity.Health, TunnelEndpoint: n.IPv4}
		}
	}
	for _, n := range c.Nodes {
		id := identity.RemoteNode
		if n.Self {
			id = identity.Host
		}
		if n.IPv4.Is4() {
			out[netip.PrefixFrom(n.IPv4, 32)] = spec.IPCacheEntry{Identity: id}
		}
	}
	for _, ep := range c.Local {
		if ep.IPv4.Is4() {
			out[netip.PrefixFrom(ep.IPv4, 32)] = spec.IPCacheEntry{Identity: ep.Identity}
		}
	}
	addPolicyPrefixes(out, c.Prefixes)
	return out
}

// addPolicyPrefixes gives the addresses of pods and nodes (the entries
// so far) the identity of the most specific in-cluster prefix holding
// them, and adds the world's prefixes that no pod or node takes.
func addPolicyPrefixes(out map[netip.Prefix]spec.IPCacheEntry, prefixes []PolicyPrefixRow) {
	inCluster := map[netip.Prefix]identity.NumericIdentity{}
	for _, p := range prefixes {
		if p.InCluster && p.Prefix.Addr().Is4() {
			inCluster[p.Prefix.Masked()] = p.Identity
		}
	}
	if len(inCluster) > 0 {
		for p, e := range out {
			for bits := p.Bits(); bits >= 0; bits-- {
				if id, ok := inCluster[netip.PrefixFrom(p.Addr(), bits).Masked()]; ok {
					e.CIDRIdentity = id
					out[p] = e
					break
				}
			}
		}
	}
	for _, p := range prefixes {
		k := p.Prefix.Masked()
		if _, taken := out[k]; !taken && !p.InCluster && k.Addr().Is4() {
			out[k] = spec.IPCacheEntry{Identity: p.Identity}
		}
	}
}

// RemoteNodes are the other nodes with a pod CIDR, for routes to their pods.
func RemoteNodes(nodes []node.Node) []spec.RemoteNode {
	var out []spec.RemoteNode
	for _, n := range nodes {
		if !n.Self && n.IPv4.Is4() && n.PodCIDR.IsValid() {
			out = append(out, spec.RemoteNode{IPv4: n.IPv4, PodCIDR: n.PodCIDR})
		}
	}
	return out
}

// podCIDROwner is the address of the node whose pod CIDR holds ip.
func podCIDROwner(nodes []node.Node, ip netip.Addr) (netip.Addr, bool) {
	for _, n := range nodes {
		if n.PodCIDR.Contains(ip) {
			return n.IPv4, true
		}
	}
	return netip.Addr{}, false
}
