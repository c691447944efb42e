package node

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/desired"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

// Node is a node of the cluster, this one included, as its Node and
// CiliumNode objects describe it.
type Node struct {
	Name    string
	IPv4    netip.Addr
	PodCIDR netip.Prefix // invalid when it has none
	Self    bool         // this node
	// HealthIPv4 is the node's health endpoint, as its CiliumNode
	// publishes it (spec.health.ipv4); invalid when it has none.
	HealthIPv4 netip.Addr
}

// Cluster reads the cluster's nodes from the tables of Node and
// CiliumNode objects.
type Cluster struct {
	// Self is this node's name.
	Self        string
	DB          *statedb.DB
	Nodes       statedb.Table[*corev1.Node]
	CiliumNodes statedb.Table[*v2.CiliumNode]
}

// ClusterCell provides *Cluster and the API's node list (GET /v1/node);
// neither with Kubernetes off (the API answers 501 then).
var ClusterCell = cell.Provide(newCluster, func(c *Cluster) server.NodeLister {
	if c == nil {
		return nil
	}
	return c
})

type clusterParams struct {
	cell.In
	Clients     *tables.Clients `optional:"true"`
	DB          *statedb.DB
	Nodes       statedb.Table[*corev1.Node]
	CiliumNodes statedb.Table[*v2.CiliumNode]
}

func newCluster(p clusterParams) *Cluster {
	if p.Clients == nil {
		return nil
	}
	return &Cluster{Self: p.Clients.NodeName, DB: p.DB, Nodes: p.Nodes, CiliumNodes: p.CiliumNodes}
}

// Inputs are the tables the nodes come from, for a desired.Controller.
func (c *Cluster) Inputs() []desired.Input {
	return []desired.Input{desired.TableInput(c.Nodes), desired.TableInput(c.CiliumNodes)}
}

// List is every node with an IPv4 address as of txn, sorted by name.
func (c *Cluster) List(txn statedb.ReadTxn) []Node {
	return Merge(c.Self, statedb.Collect(c.Nodes.All(txn)), statedb.Collect(c.CiliumNodes.All(txn)))
}

// Watch is List as of now, with the channels that close when the nodes
// change.
func (c *Cluster) Watch() ([]Node, *statedb.WatchSet) {
	txn := c.DB.ReadTxn()
	nodes, nodesChanged := c.Nodes.AllWatch(txn)
	ciliumNodes, ciliumNodesChanged := c.CiliumNodes.AllWatch(txn)
	ws := statedb.NewWatchSet()
	ws.Add(nodesChanged, ciliumNodesChanged)
	return Merge(c.Self, statedb.Collect(nodes), statedb.Collect(ciliumNodes)), ws
}

// ListNodes implements server.NodeLister: the nodes as the ipcache and
// the routes see them.
func (c *Cluster) ListNodes() ([]models.Node, error) {
	out := []models.Node{}
	for _, n := range c.List(c.DB.ReadTxn()) {
		m := models.Node{Name: n.Name, IPv4: n.IPv4.String(), Local: n.Self}
		if n.PodCIDR.IsValid() {
			m.PodCIDR = n.PodCIDR.String()
		}
		out = append(out, m)
	}
	return out, nil
}

// SelfIPv4 is this node's IPv4 address as of txn, once its objects say it.
func (c *Cluster) SelfIPv4(txn statedb.ReadTxn) (netip.Addr, bool) {
	for _, n := range c.List(txn) {
		if n.Self {
			return n.IPv4, true
		}
	}
	return netip.Addr{}, false
}

// OwnPodCIDR is the first IPv4 CIDR of spec.ipam.podCIDRs of this node's
// CiliumNode as of txn, invalid while there is none.
func (c *Cluster) OwnPodCIDR(txn statedb.ReadTxn) netip.Prefix {
	n, ok := tables.Get(txn, c.CiliumNodes, c.Self)
	if !ok {
		return netip.Prefix{}
	}
	return firstIPv4Prefix(n.Spec.IPAM.PodCIDRs)
}

// Merge merges Nodes and CiliumNodes by name, sorted by name, and leaves
// out those without an IPv4 address; self is this node's name. The
// Node's InternalIP wins; the pod CIDR is the CiliumNode's when the
// operator's cluster-pool IPAM wrote one (that is the pool the node's
// agent allocates from), else the Node's.
func Merge(self string, nodes []*corev1.Node, ciliumNodes []*v2.CiliumNode) []Node {
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
		if p := firstIPv4Prefix(n.Spec.IPAM.PodCIDRs); p.IsValid() {
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
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
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
