package node_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/k8s/agent/agenttest"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/node"
)

// A CiliumNode's spec.health.ipv4 is the node's health endpoint; what
// does not parse as IPv4 is none.
func TestMergeReadsHealthAddresses(t *testing.T) {
	b := k8stest.CiliumNode("b", "192.168.0.3", "10.0.2.0/24")
	b.Spec.HealthAddressing.IPv4 = "10.0.2.7"
	c := k8stest.CiliumNode("c", "192.168.0.4", "10.0.3.0/24")
	c.Spec.HealthAddressing.IPv4 = "fd00::7"
	got := node.Merge("a", nil, []*v2.CiliumNode{b, c})
	if len(got) != 2 || got[0].HealthIPv4 != netip.MustParseAddr("10.0.2.7") || got[1].HealthIPv4.IsValid() {
		t.Fatalf("nodes %+v", got)
	}
}

// The cluster's nodes come from the tables of Node and CiliumNode
// objects: this node's address and pod CIDR, the API's node list, and a
// watch that fires when a node joins.
func TestClusterReadsTheTables(t *testing.T) {
	cl := agenttest.Start(t, "a", []runtime.Object{k8stest.Node("a", "192.168.0.2", ""), k8stest.Node("b", "192.168.0.3", "10.0.2.0/24")},
		k8stest.CiliumNode("a", "192.168.0.2", "10.0.1.0/24"))
	c := &node.Cluster{Self: "a", DB: cl.DB, Nodes: cl.Tables.Nodes, CiliumNodes: cl.Tables.CiliumNodes}
	txn := cl.DB.ReadTxn()
	if ip, ok := c.SelfIPv4(txn); !ok || ip != netip.MustParseAddr("192.168.0.2") {
		t.Errorf("SelfIPv4: %v %v", ip, ok)
	}
	if p := c.OwnPodCIDR(txn); p != netip.MustParsePrefix("10.0.1.0/24") {
		t.Errorf("OwnPodCIDR: %v, want the CiliumNode's", p)
	}
	listed, err := c.ListNodes()
	want := []models.Node{{Name: "a", IPv4: "192.168.0.2", PodCIDR: "10.0.1.0/24", Local: true},
		{Name: "b", IPv4: "192.168.0.3", PodCIDR: "10.0.2.0/24"}}
	if err != nil || !slices.Equal(listed, want) {
		t.Errorf("ListNodes: %+v %v, want %+v", listed, err, want)
	}
	nodes, ws := c.Watch()
	if len(nodes) != 2 {
		t.Fatalf("Watch: %+v", nodes)
	}
	if _, err := cl.Clients.Kube.CoreV1().Nodes().Create(context.Background(), k8stest.Node("c", "192.168.0.4", ""),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ws.Wait(ctx, 0); err != nil {
		t.Fatal("no change seen for a new node")
	}
	if nodes := c.List(cl.DB.ReadTxn()); len(nodes) != 3 || nodes[2].Name != "c" {
		t.Errorf("after node c joined: %+v", nodes)
	}
}
