package agent

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity/allocator"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/labels"
)

// startWatchers runs watchers over fake clientsets until the test ends.
func startWatchers(t *testing.T, node string, kubeObjs []runtime.Object, ciliumObjs ...runtime.Object) (*Clients, *Watchers) {
	t.Helper()
	c := &Clients{Kube: kubefake.NewClientset(kubeObjs...), Cilium: client.NewFake(ciliumObjs...)}
	w := NewWatchers(c, node, 0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.Run(ctx)
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := w.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return c, w
}

// eventually polls cond until it holds or 30s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPublisherSync(t *testing.T) {
	ctx := context.Background()
	kubeObjs := []runtime.Object{
		makeNamespace("shop", nil),
		makePod("shop", "web", func(p *corev1.Pod) { p.Spec.NodeName = "a" }),
		makeNode("a", "192.168.0.2", "10.0.1.0/24"),
	}
	// Another node's CiliumEndpoint must survive this node's sync.
	foreign := makeCEP("shop", "db", "10.0.2.8", "192.168.0.3", 301)
	c, w := startWatchers(t, "a", kubeObjs, foreign)
	alloc, err := allocator.NewAllocator(c.Cilium.CiliumV2().CiliumIdentities(), discard, allocator.AllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ids := NewPodIdentities(c.Kube, alloc, labels.DefaultFilter())
	pod := endpoint.Pod{Namespace: "shop", Name: "web"}
	num, err := ids.Allocate(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	ep := endpoint.Endpoint{ID: 3, PodNamespace: "shop", PodName: "web", IPv4: netip.MustParseAddr("10.0.1.5"), Identity: num}
	pub := NewPublisher(c, w, ids)
	ceps := c.Cilium.CiliumV2().CiliumEndpoints("shop")

	if err := pub.Sync(ctx, []endpoint.Endpoint{ep}); err != nil {
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
	eventually(t, "the cache to see the CiliumEndpoint", func() bool {
		_, ok, _ := w.CiliumEndpoints.GetStore().GetByKey("shop/web")
		return ok
	})

	// A new identity (labels changed) updates the object in place.
	ep.Identity = 999
	if err := pub.Sync(ctx, []endpoint.Endpoint{ep}); err != nil {
		t.Fatal(err)
	}
	if got, err = ceps.Get(ctx, "web", metav1.GetOptions{}); err != nil || got.Status.Identity.ID != 999 {
		t.Fatalf("after update: %+v, %v", got, err)
	}
	eventually(t, "the cache to see the update", func() bool {
		obj, _, _ := w.CiliumEndpoints.GetStore().GetByKey("shop/web")
		cep, ok := obj.(*v2.CiliumEndpoint)
		return ok && cep.Status.Identity.ID == 999
	})

	// The endpoint is gone: its object goes, the other node's stays.
	if err := pub.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ceps.Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("CiliumEndpoint of a deleted endpoint still exists")
	}
	if _, err := ceps.Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Errorf("another node's CiliumEndpoint: %v", err)
	}
}

// The watchers' view feeds the ipcache: what another node publishes shows
// up as a remote entry behind that node.
func TestWatchersCluster(t *testing.T) {
	kubeObjs := []runtime.Object{makeNode("a", "192.168.0.2", ""), makeNode("b", "192.168.0.3", "10.0.2.0/24")}
	c, w := startWatchers(t, "a", kubeObjs)
	changes := make(chan struct{}, 1)
	w.OnChange(func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	})
	if _, err := c.Cilium.CiliumV2().CiliumEndpoints("shop").Create(context.Background(),
		makeCEP("shop", "db", "10.0.2.8", "192.168.0.3", 301), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("no change signalled for a new CiliumEndpoint")
	}
	eventually(t, "the CiliumEndpoint in the ipcache", func() bool {
		e, ok := DesiredIPCache(w.Cluster(nil))[pfx("10.0.2.8/32")]
		return ok && e == entry(301, "192.168.0.3")
	})
	got := DesiredIPCache(w.Cluster([]endpoint.Endpoint{local("10.0.1.5", 300)}))
	if got[pfx("192.168.0.2/32")] != entry(1, "") || got[pfx("192.168.0.3/32")] != entry(6, "") ||
		got[pfx("10.0.1.5/32")] != entry(300, "") {
		t.Errorf("ipcache %v", got)
	}
}
