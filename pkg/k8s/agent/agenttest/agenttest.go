// Package agenttest runs the agent's Kubernetes tables over
// fake clientsets, for the tests of the packages that read them.
package agenttest

import (
	"context"
	"testing"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

// Cluster is a fake cluster as the agent of one node reads it.
type Cluster struct {
	Clients *agent.Clients
	DB      *statedb.DB
	Tables  *tables.RW
}

// Start fills the tables of the node self from fake clientsets holding kubeObjs
// and ciliumObjs, listed, until the test ends.
func Start(t testing.TB, self string, kubeObjs []runtime.Object, ciliumObjs ...runtime.Object) *Cluster {
	t.Helper()
	c := &agent.Clients{Kube: kubefake.NewClientset(kubeObjs...), Cilium: client.NewFake(ciliumObjs...)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := statedb.New()
	tbls, err := tables.Start(ctx, db, &tables.Clients{Kube: c.Kube, Cilium: c.Cilium, NodeName: self})
	if err != nil {
		t.Fatal(err)
	}
	return &Cluster{Clients: c, DB: db, Tables: tbls}
}

// Cells run the tables of the node self in a hive, over fake
// clientsets holding kubeObjs and ciliumObjs: what the agent's Kubernetes
// cells provide, in the hive's own database.
func Cells(self string, kubeObjs []runtime.Object, ciliumObjs ...runtime.Object) (*agent.Clients, cell.Cell) {
	c := &agent.Clients{Kube: kubefake.NewClientset(kubeObjs...), Cilium: client.NewFake(ciliumObjs...)}
	return c, cell.Group(
		cell.Provide(
			func() *agent.Clients { return c },
			func() agent.Config { return agent.Config{EnableK8s: true, K8sNodeName: self} },
			func() *tables.Clients { return &tables.Clients{Kube: c.Kube, Cilium: c.Cilium, NodeName: self} },
		),
		tables.Cell,
	)
}
