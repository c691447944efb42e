// Package agent is the agent's Kubernetes side: the API clients, and the
// views of pods, namespaces, nodes and Cilium objects that identities,
// CiliumEndpoints, the pod CIDR, Hubble and the health checker take what
// they need from. The objects themselves are in the tables of
// pkg/k8s/tables.
package agent

import (
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

// Tables are the Kubernetes tables the watchers read, and the policies'
// tables, which the policy engine follows.
type Tables struct {
	Pods             statedb.Table[*corev1.Pod]
	Namespaces       statedb.Table[*corev1.Namespace]
	Nodes            statedb.Table[*corev1.Node]
	CiliumNodes      statedb.Table[*v2.CiliumNode]
	CiliumEndpoints  statedb.Table[*v2.CiliumEndpoint]
	CiliumIdentities statedb.Table[*v2.CiliumIdentity]

	NetworkPolicies statedb.Table[*networkingv1.NetworkPolicy]
	CNPs            statedb.Table[*v2.CiliumNetworkPolicy]
	CCNPs           statedb.Table[*v2.CiliumClusterwideNetworkPolicy]
	CIDRGroups      statedb.Table[*v2.CiliumCIDRGroup]
}

// TablesOf are the watchers' tables among all of t.
func TablesOf(t *tables.RW) Tables {
	return Tables{Pods: t.Pods, Namespaces: t.Namespaces, Nodes: t.Nodes, CiliumNodes: t.CiliumNodes,
		CiliumEndpoints: t.CiliumEndpoints, CiliumIdentities: t.CiliumIdentities,
		NetworkPolicies: t.NetworkPolicies, CNPs: t.CNPs, CCNPs: t.CCNPs, CIDRGroups: t.CIDRGroups}
}

// Watchers hold the agent's view of the cluster: this node's pods, all
// namespaces, nodes, CiliumNodes, CiliumEndpoints and CiliumIdentities.
type Watchers struct {
	NodeName string
	db       *statedb.DB
	t        Tables
}

// NewWatchers reads the cluster from t in db.
func NewWatchers(db *statedb.DB, t Tables, nodeName string) *Watchers {
	return &Watchers{NodeName: nodeName, db: db, t: t}
}

// get is the object named key in t, as of now.
func get[T tables.Object](db *statedb.DB, t statedb.Table[T], key string) (T, bool) {
	return tables.Get(db.ReadTxn(), t, key)
}

// list is every object in t, as of now.
func list[T any](db *statedb.DB, t statedb.Table[T]) []T {
	return statedb.Collect(t.All(db.ReadTxn()))
}

// DB and Tables are where the watchers read, for those who follow the
// tables' changes themselves.
func (w *Watchers) DB() *statedb.DB { return w.db }
func (w *Watchers) Tables() Tables  { return w.t }

// CiliumEndpoint returns the CiliumEndpoint namespace/name, of any node.
func (w *Watchers) CiliumEndpoint(namespace, name string) (*v2.CiliumEndpoint, bool) {
	return get(w.db, w.t.CiliumEndpoints, namespace+"/"+name)
}

// Pod returns this node's pod.
func (w *Watchers) Pod(namespace, name string) (*corev1.Pod, bool) {
	return get(w.db, w.t.Pods, namespace+"/"+name)
}
