package agent

import (
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// clusterView is what translations read of the cluster (policyk8s's
// Services and CIDRGroups) as the tables held it in one transaction: the
// one whose changes the engine has taken, so that a translation and the
// changes that may call for the next one agree.
type clusterView struct {
	txn statedb.ReadTxn
	t   *inputTables
}

// clusterAt is the cluster as of txn.
func (a *Agent) clusterAt(txn statedb.ReadTxn) policyk8s.Cluster {
	v := clusterView{txn: txn, t: &a.in}
	return policyk8s.Cluster{Services: v, CIDRGroups: v, L7Proxy: a.l7Proxy}
}

// KubeService implements policyk8s.Services.
func (v clusterView) KubeService(namespace, name string) (*corev1.Service, bool) {
	return tables.Get(v.txn, v.t.Services, namespace+"/"+name)
}

// KubeServices implements policyk8s.Services.
func (v clusterView) KubeServices(namespace string) []*corev1.Service {
	if namespace == "" {
		return statedb.Collect(v.t.Services.All(v.txn))
	}
	return statedb.Collect(v.t.Services.Prefix(v.txn, tables.NameIndex[*corev1.Service]().Query(namespace+"/")))
}

// EndpointSlices implements policyk8s.Services.
func (v clusterView) EndpointSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	return statedb.Collect(v.t.EndpointSlices.List(v.txn, tables.ServiceIndex.Query(namespace+"/"+name)))
}

// CIDRGroup implements policyk8s.CIDRGroups.
func (v clusterView) CIDRGroup(name string) (*v2.CiliumCIDRGroup, bool) {
	return tables.Get(v.txn, v.t.CIDRGroups, name)
}

// ListCIDRGroups implements policyk8s.CIDRGroups.
func (v clusterView) ListCIDRGroups() []*v2.CiliumCIDRGroup {
	return statedb.Collect(v.t.CIDRGroups.All(v.txn))
}
