package agent

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// Cluster is the watchers' view of the cluster for the ipcache as of txn,
// with local as this node's endpoints: *Watchers is the ipcache's
// ClusterSource.
func (w *Watchers) Cluster(txn statedb.ReadTxn, local []endpoint.Endpoint) ipcache.Cluster {
	return clusterOf(w.NodeName, local, statedb.Collect(w.t.CiliumEndpoints.All(txn)),
		statedb.Collect(w.t.Nodes.All(txn)), statedb.Collect(w.t.CiliumNodes.All(txn)))
}

// WatchNodes is ListNodes with the channels that close when the nodes
// change.
func (w *Watchers) WatchNodes() ([]ipcache.Node, *statedb.WatchSet) {
	txn := w.db.ReadTxn()
	nodes, nodesChanged := w.t.Nodes.AllWatch(txn)
	ciliumNodes, ciliumNodesChanged := w.t.CiliumNodes.AllWatch(txn)
	ws := statedb.NewWatchSet()
	ws.Add(nodesChanged, ciliumNodesChanged)
	return mergeNodes(w.NodeName, statedb.Collect(nodes), statedb.Collect(ciliumNodes)), ws
}

// ListNodes is every node with an IPv4 address, from Nodes and
// CiliumNodes merged, sorted by name.
func (w *Watchers) ListNodes() []ipcache.Node {
	return mergeNodes(w.NodeName, list(w.db, w.t.Nodes), list(w.db, w.t.CiliumNodes))
}

// ListCiliumEndpoints lists the CiliumEndpoints of the cluster from the cache.
func (w *Watchers) ListCiliumEndpoints() []*v2.CiliumEndpoint {
	return list(w.db, w.t.CiliumEndpoints)
}

// NodeIPv4 is the IPv4 address of this node, once the watchers know it.
func (w *Watchers) NodeIPv4() (netip.Addr, bool) {
	for _, n := range w.ListNodes() {
		if n.Self {
			return n.IPv4, true
		}
	}
	return netip.Addr{}, false
}

func clusterOf(self string, local []endpoint.Endpoint, ceps []*v2.CiliumEndpoint, nodes []*corev1.Node,
	ciliumNodes []*v2.CiliumNode) ipcache.Cluster {
	c := ipcache.Cluster{Local: local, Nodes: mergeNodes(self, nodes, ciliumNodes)}
	for _, cep := range ceps {
		if ep, ok := RemoteEndpoint(cep); ok {
			c.Remote = append(c.Remote, ep)
		}
	}
	return c
}

// mergeNodes merges Nodes and CiliumNodes by name, sorted by name, and
// leaves out those without an IPv4 address. The Node's InternalIP wins;
// the pod CIDR is the CiliumNode's when the operator's cluster-pool IPAM
// wrote one (that is the pool the node's agent allocates from), else the
// Node's.
func mergeNodes(self string, nodes []*corev1.Node, ciliumNodes []*v2.CiliumNode) []ipcache.Node {
	byName := map[string]*ipcache.Node{}
	get := func(name string) *ipcache.Node {
		if byName[name] == nil {
			byName[name] = &ipcache.Node{Name: name, Self: name == self}
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
		if p := firstIPv4Prefix(n.Spec.IPAM.PodCIDRs); p.IsValid() {
			a.PodCIDR = p
		}
		if ip, err := netip.ParseAddr(n.Spec.HealthAddressing.IPv4); err == nil && ip.Is4() {
			a.HealthIPv4 = ip
		}
	}
	out := make([]ipcache.Node, 0, len(byName))
	for _, a := range byName {
		if a.IPv4.IsValid() {
			out = append(out, *a)
		}
	}
	slices.SortFunc(out, func(a, b ipcache.Node) int { return cmp.Compare(a.Name, b.Name) })
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
func RemoteEndpoint(cep *v2.CiliumEndpoint) (ep ipcache.RemoteEndpoint, ok bool) {
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
			return ipcache.RemoteEndpoint{IP: a, Node: node, Identity: identity.NumericIdentity(s.Identity.ID)}, true
		}
	}
	return ep, false
}
