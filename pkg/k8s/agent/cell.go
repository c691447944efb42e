package agent

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

// Cell connects to Kubernetes and provides *Clients (and the tables'
// *tables.Clients), *Watchers, the Services and EndpointSlices
// (*ServiceSource) that policies' toServices read, and the Events the load
// balancer warns Services' authors with (all nil with Kubernetes off).
// What they read is in the tables of pkg/k8s/tables.
var Cell = cell.Module("k8s", "Kubernetes clients and watchers",
	cell.Config(DefaultConfig),
	cell.Provide(newClients, tableClients, newServiceSource, newServiceEvents),
	WatchersCell,
)

// WatchersCell provides *Watchers over the tables of pkg/k8s/tables,
// given Config and *Clients.
var WatchersCell = cell.Provide(newWatchers)

func newClients(cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, nil
	}
	return NewClients(cfg)
}

// tableClients are what the tables' reflectors list and watch through.
func tableClients(cfg Config, c *Clients) *tables.Clients {
	if c == nil {
		return nil
	}
	return &tables.Clients{Kube: c.Kube, Cilium: c.Cilium, NodeName: cfg.K8sNodeName}
}

type watchersParams struct {
	cell.In

	Config           Config
	Clients          *Clients `optional:"true"`
	DB               *statedb.DB
	Pods             statedb.Table[*corev1.Pod]
	Namespaces       statedb.Table[*corev1.Namespace]
	Nodes            statedb.Table[*corev1.Node]
	CiliumNodes      statedb.Table[*v2.CiliumNode]
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint]
	CiliumIdentities statedb.Table[*v2.CiliumIdentity]
	NetworkPolicies  statedb.Table[*networkingv1.NetworkPolicy]
	CNPs             statedb.Table[*v2.CiliumNetworkPolicy]
	CCNPs            statedb.Table[*v2.CiliumClusterwideNetworkPolicy]
	CIDRGroups       statedb.Table[*v2.CiliumCIDRGroup]
}

func newWatchers(p watchersParams) *Watchers {
	if p.Clients == nil {
		return nil
	}
	w := NewWatchers(p.DB, Tables{Pods: p.Pods, Namespaces: p.Namespaces, Nodes: p.Nodes, CiliumNodes: p.CiliumNodes,
		CiliumEndpoints: p.CiliumEndpoints, CiliumIdentities: p.CiliumIdentities,
		NetworkPolicies: p.NetworkPolicies, CNPs: p.CNPs, CCNPs: p.CCNPs, CIDRGroups: p.CIDRGroups}, p.Config.K8sNodeName)
	return w
}
