package ciliumendpoint

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cilium/hive/hivetest"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	"github.com/cilium-go/cilium/pkg/k8s/agent/agenttest"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/node"
)

func TestPublisherSync(t *testing.T) {
	ctx := context.Background()
	kubeObjs := []runtime.Object{
		k8stest.Namespace("shop", nil),
		k8stest.Pod("shop", "web", func(p *corev1.Pod) { p.Spec.NodeName = "a" }),
		k8stest.Node("a", "192.168.0.2", "10.0.1.0/24"),
	}
	// Another node's CiliumEndpoint must survive this node's sync.
	foreign := k8stest.CiliumEndpoint("shop", "db", "10.0.2.8", "192.168.0.3", 301)
	cl := agenttest.Start(t, "a", kubeObjs, foreign)
	c := cl.Clients
	alloc, err := allocator.NewAllocator(c.Cilium.CiliumV2().CiliumIdentities(), hivetest.Logger(t), allocator.AllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ids := allocator.NewPodIdentities(c.Kube, alloc, labels.DefaultFilter(), "default")
	pod := endpoint.Pod{Namespace: "shop", Name: "web"}
	num, err := ids.Allocate(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	ep := endpoint.Endpoint{ID: 3, PodNamespace: "shop", PodName: "web", IPv4: netip.MustParseAddr("10.0.1.5"), Identity: num}
	nodes := &node.Cluster{Self: "a", DB: cl.DB, Nodes: cl.Tables.Nodes, CiliumNodes: cl.Tables.CiliumNodes}
	pub := NewPublisher(c, nodes, cl.Tables.Pods, cl.Tables.CiliumEndpoints, ids)
	sync := func(local ...endpoint.Endpoint) error { return pub.Sync(ctx, cl.DB.ReadTxn(), local) }
	cached := func() (*v2.CiliumEndpoint, bool) {
		return tables.Get(cl.DB.ReadTxn(), cl.Tables.CiliumEndpoints, "shop/web")
	}
	ceps := c.Cilium.CiliumV2().CiliumEndpoints("shop")

	if err := sync(ep); err != nil {
		t.Fatal(err)
	}
	got, err := ceps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CiliumEndpoint not created: %v", err)
	}
	if got.Status.Identity.ID != int64(num) || got.Status.Networking.NodeIP != "192.168.0.2" ||
		got.Status.Networking.Addressing[0].IPV4 != "10.0.1.5" || len(got.Status.Identity.Labels) == 0 {
		t.Errorf("CiliumEndpoint status %+v %+v", got.Status.Identity, got.Status.Networking)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if _, ok := cached(); !ok {
			return errors.New("the cache does not see the CiliumEndpoint")
		}
		return nil
	})

	// A new identity (labels changed) updates the object in place.
	ep.Identity = 999
	if err := sync(ep); err != nil {
		t.Fatal(err)
	}
	if got, err = ceps.Get(ctx, "web", metav1.GetOptions{}); err != nil || got.Status.Identity.ID != 999 {
		t.Fatalf("after update: %+v, %v", got, err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		cep, ok := cached()
		if !(ok && cep.Status.Identity.ID == 999) {
			return errors.New("the cache does not see the update")
		}
		return nil
	})

	// The endpoint is gone: its object goes, the other node's stays.
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := ceps.Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("CiliumEndpoint of a deleted endpoint still exists")
	}
	if _, err := ceps.Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Errorf("another node's CiliumEndpoint: %v", err)
	}
}
