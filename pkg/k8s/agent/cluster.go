package agent

import (
	"net/netip"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/ipcache"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// WatchNodes is ListNodes with the channels that close when the nodes
// change.
func (w *Watchers) WatchNodes() ([]ipcache.Node, *statedb.WatchSet) {
	txn := w.db.ReadTxn()
	nodes, nodesChanged := w.t.Nodes.AllWatch(txn)
	ciliumNodes, ciliumNodesChanged := w.t.CiliumNodes.AllWatch(txn)
	ws := statedb.NewWatchSet()
	ws.Add(nodesChanged, ciliumNodesChanged)
	return ipcache.MergeNodes(w.NodeName, statedb.Collect(nodes), statedb.Collect(ciliumNodes)), ws
}

// ListNodes is every node with an IPv4 address, from Nodes and
// CiliumNodes merged as the ipcache merges them, sorted by name.
func (w *Watchers) ListNodes() []ipcache.Node {
	return ipcache.MergeNodes(w.NodeName, list(w.db, w.t.Nodes), list(w.db, w.t.CiliumNodes))
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
