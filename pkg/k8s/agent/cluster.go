package agent

import (
	"net/netip"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/node"
)

// Cluster is the watchers' view of the cluster for the ipcache as of txn,
// with local as this node's endpoints: *Watchers is the ipcache's
// ClusterSource.
func (w *Watchers) Cluster(txn statedb.ReadTxn, local []endpoint.Endpoint) ipcache.Cluster {
	return clusterOf(w.NodeName, local, statedb.Collect(w.t.CiliumEndpoints.All(txn)),
		statedb.Collect(w.t.Nodes.All(txn)), statedb.Collect(w.t.CiliumNodes.All(txn)))
}

func clusterOf(self string, local []endpoint.Endpoint, ceps []*v2.CiliumEndpoint, nodes []*corev1.Node,
	ciliumNodes []*v2.CiliumNode) ipcache.Cluster {
	c := ipcache.Cluster{Local: local, Nodes: node.Merge(self, nodes, ciliumNodes)}
	for _, cep := range ceps {
		if ep, ok := RemoteEndpoint(cep); ok {
			c.Remote = append(c.Remote, ep)
		}
	}
	return c
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
