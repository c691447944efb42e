package tables

import (
	"context"
	"fmt"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cilium-go/cilium/pkg/health"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// Cell provides a read-only statedb.Table for every watched kind and
// fills each with its reflector when *Clients is there. Without
// Kubernetes (no *Clients) the tables stay empty, and initialized.
var Cell = cell.Module("k8s-tables", "Kubernetes objects as tables filled by reflectors",
	health.JobGroup,
	cell.ProvidePrivate(NewRW),
	cell.Provide((*RW).readOnly),
	cell.Invoke(registerReflectors),
)

// RW are the tables as their reflectors write them.
type RW struct {
	Pods             statedb.RWTable[*corev1.Pod]
	Namespaces       statedb.RWTable[*corev1.Namespace]
	Nodes            statedb.RWTable[*corev1.Node]
	Services         statedb.RWTable[*corev1.Service]
	EndpointSlices   statedb.RWTable[*discoveryv1.EndpointSlice]
	NetworkPolicies  statedb.RWTable[*networkingv1.NetworkPolicy]
	CiliumNodes      statedb.RWTable[*v2.CiliumNode]
	CiliumEndpoints  statedb.RWTable[*v2.CiliumEndpoint]
	CiliumIdentities statedb.RWTable[*v2.CiliumIdentity]
	CNPs             statedb.RWTable[*v2.CiliumNetworkPolicy]
	CCNPs            statedb.RWTable[*v2.CiliumClusterwideNetworkPolicy]
	CIDRGroups       statedb.RWTable[*v2.CiliumCIDRGroup]
	L2Policies       statedb.RWTable[*v2alpha1.CiliumL2AnnouncementPolicy]
	NodeLeases       statedb.RWTable[*coordinationv1.Lease]
}

// NewRW creates every table and registers it with db.
func NewRW(db *statedb.DB) (*RW, error) {
	var (
		t   RW
		err error
	)
	create(db, &err, &t.Pods, PodsName)
	create(db, &err, &t.Namespaces, NamespacesName)
	create(db, &err, &t.Nodes, NodesName)
	create(db, &err, &t.Services, ServicesName)
	create(db, &err, &t.EndpointSlices, EndpointSlicesName, ServiceIndex)
	create(db, &err, &t.NetworkPolicies, NetworkPoliciesName)
	create(db, &err, &t.CiliumNodes, CiliumNodesName)
	create(db, &err, &t.CiliumEndpoints, CiliumEndpointsName, EndpointIPIndex)
	create(db, &err, &t.CiliumIdentities, CiliumIdentitiesName)
	create(db, &err, &t.CNPs, CNPsName)
	create(db, &err, &t.CCNPs, CCNPsName)
	create(db, &err, &t.CIDRGroups, CIDRGroupsName)
	create(db, &err, &t.L2Policies, L2PoliciesName)
	create(db, &err, &t.NodeLeases, NodeLeasesName)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// create makes *dst unless an earlier table failed.
func create[T Object](db *statedb.DB, err *error, dst *statedb.RWTable[T], name string, secondary ...statedb.Indexer[T]) {
	if *err == nil {
		*dst, *err = newTable(db, name, secondary...)
	}
}

// RO are the tables as consumers read them.
type RO struct {
	cell.Out

	Pods             statedb.Table[*corev1.Pod]
	Namespaces       statedb.Table[*corev1.Namespace]
	Nodes            statedb.Table[*corev1.Node]
	Services         statedb.Table[*corev1.Service]
	EndpointSlices   statedb.Table[*discoveryv1.EndpointSlice]
	NetworkPolicies  statedb.Table[*networkingv1.NetworkPolicy]
	CiliumNodes      statedb.Table[*v2.CiliumNode]
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint]
	CiliumIdentities statedb.Table[*v2.CiliumIdentity]
	CNPs             statedb.Table[*v2.CiliumNetworkPolicy]
	CCNPs            statedb.Table[*v2.CiliumClusterwideNetworkPolicy]
	CIDRGroups       statedb.Table[*v2.CiliumCIDRGroup]
	L2Policies       statedb.Table[*v2alpha1.CiliumL2AnnouncementPolicy]
	NodeLeases       statedb.Table[*coordinationv1.Lease]
}

func (t *RW) readOnly() RO {
	return RO{
		Pods: t.Pods, Namespaces: t.Namespaces, Nodes: t.Nodes, Services: t.Services,
		EndpointSlices: t.EndpointSlices, NetworkPolicies: t.NetworkPolicies, CiliumNodes: t.CiliumNodes,
		CiliumEndpoints: t.CiliumEndpoints, CiliumIdentities: t.CiliumIdentities,
		CNPs: t.CNPs, CCNPs: t.CCNPs, CIDRGroups: t.CIDRGroups, L2Policies: t.L2Policies,
		NodeLeases: t.NodeLeases,
	}
}

type reflectorParams struct {
	cell.In

	Jobs    job.Group
	DB      *statedb.DB
	Tables  *RW
	Clients *Clients `optional:"true"`
}

func registerReflectors(p reflectorParams) {
	if p.Clients == nil {
		return
	}
	RegisterAll(p.Jobs, p.DB, p.Tables, p.Clients)
}

// RegisterAll registers every kind's reflector, one per table, in jobs.
// The tables stay uninitialized until their first list is in, so call it
// before the hive starts.
func RegisterAll(jobs job.Group, db *statedb.DB, t *RW, c *Clients) {
	for _, r := range reflectors(t, c) {
		name, run := r.prepare(db)
		jobs.Add(job.OneShot(name, func(ctx context.Context, _ cell.Health) error {
			run(ctx)
			return nil
		}))
	}
}

// Start fills new tables in db from c until ctx ends, and returns them
// once every one holds its first list: the tables without a hive, for
// tests and benchmarks.
func Start(ctx context.Context, db *statedb.DB, c *Clients) (*RW, error) {
	t, err := NewRW(db)
	if err != nil {
		return nil, err
	}
	for _, r := range reflectors(t, c) {
		_, run := r.prepare(db)
		go run(ctx)
	}
	for _, tbl := range t.all() {
		_, initialized := tbl.Initialized(db.ReadTxn())
		select {
		case <-initialized:
		case <-ctx.Done():
			return nil, fmt.Errorf("table %s: %w", tbl.Name(), ctx.Err())
		}
	}
	return t, nil
}

func (t *RW) all() []statedb.TableMeta {
	return []statedb.TableMeta{t.Pods, t.Namespaces, t.Nodes, t.Services, t.EndpointSlices, t.NetworkPolicies,
		t.CiliumNodes, t.CiliumEndpoints, t.CiliumIdentities, t.CNPs, t.CCNPs, t.CIDRGroups, t.L2Policies, t.NodeLeases}
}

// reflectors are every kind's reflector, one per table, of the clients
// that c has (the tables of a missing one stay empty). Pods are this
// node's only: nothing on a node needs the others' pods.
func reflectors(t *RW, c *Clients) []runner {
	var out []runner
	if kube := c.Kube; kube != nil {
		out = append(out, kubeReflectors(t, kube, c.NodeName)...)
	}
	if cilium := c.Cilium; cilium != nil {
		out = append(out, ciliumReflectors(t, cilium)...)
	}
	return out
}

func kubeReflectors(t *RW, kube kubernetes.Interface, node string) []runner {
	return []runner{
		Reflector[*corev1.Pod]{Table: t.Pods, Transform: trim[*corev1.Pod],
			ListerWatcher: listWatch(kube, kube.CoreV1().Pods(""), onNode(node))},
		Reflector[*corev1.Namespace]{Table: t.Namespaces, Transform: trim[*corev1.Namespace],
			ListerWatcher: listWatch(kube, kube.CoreV1().Namespaces(), nil)},
		Reflector[*corev1.Node]{Table: t.Nodes, Transform: trim[*corev1.Node],
			ListerWatcher: listWatch(kube, kube.CoreV1().Nodes(), nil)},
		Reflector[*corev1.Service]{Table: t.Services, Transform: trim[*corev1.Service],
			ListerWatcher: listWatch(kube, kube.CoreV1().Services(""), nil)},
		Reflector[*discoveryv1.EndpointSlice]{Table: t.EndpointSlices, Transform: trim[*discoveryv1.EndpointSlice],
			ListerWatcher: listWatch(kube, kube.DiscoveryV1().EndpointSlices(""), nil)},
		Reflector[*networkingv1.NetworkPolicy]{Table: t.NetworkPolicies, Transform: trim[*networkingv1.NetworkPolicy],
			ListerWatcher: listWatch(kube, kube.NetworkingV1().NetworkPolicies(""), nil)},
		Reflector[*coordinationv1.Lease]{Table: t.NodeLeases, Transform: trim[*coordinationv1.Lease],
			ListerWatcher: listWatch(kube, kube.CoordinationV1().Leases(""), labelled(NodeLeaseLabel))},
	}
}

func ciliumReflectors(t *RW, cilium client.Interface) []runner {
	return []runner{
		Reflector[*v2.CiliumNode]{Table: t.CiliumNodes, Transform: trim[*v2.CiliumNode],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2().CiliumNodes(), nil)},
		Reflector[*v2.CiliumEndpoint]{Table: t.CiliumEndpoints, Transform: trim[*v2.CiliumEndpoint],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2().CiliumEndpoints(""), nil)},
		Reflector[*v2.CiliumIdentity]{Table: t.CiliumIdentities, Transform: trim[*v2.CiliumIdentity],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2().CiliumIdentities(), nil)},
		Reflector[*v2.CiliumNetworkPolicy]{Table: t.CNPs, Transform: trim[*v2.CiliumNetworkPolicy],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2().CiliumNetworkPolicies(""), nil)},
		Reflector[*v2.CiliumClusterwideNetworkPolicy]{Table: t.CCNPs, Transform: trim[*v2.CiliumClusterwideNetworkPolicy],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2().CiliumClusterwideNetworkPolicies(), nil)},
		Reflector[*v2.CiliumCIDRGroup]{Table: t.CIDRGroups, Transform: trim[*v2.CiliumCIDRGroup],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2().CiliumCIDRGroups(), nil)},
		Reflector[*v2alpha1.CiliumL2AnnouncementPolicy]{Table: t.L2Policies, Transform: trim[*v2alpha1.CiliumL2AnnouncementPolicy],
			ListerWatcher: listWatch(cilium, cilium.CiliumV2alpha1().CiliumL2AnnouncementPolicies(), nil)},
	}
}
