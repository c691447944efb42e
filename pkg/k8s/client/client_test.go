package client

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

func TestInformer(t *testing.T) {
	fake := NewFake(&v2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	inf := NewCiliumNodeInformer(fake, 0, nil)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go inf.Run(stop)
	// A deadline, so that an informer that never syncs fails the test instead of hanging it.
	syncCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("cache did not sync within 30s")
	}
	if _, err := fake.CiliumV2().CiliumNodes().Create(t.Context(), &v2.CiliumNode{
		ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(inf.GetStore().ListKeys()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("informer has %v, want a and b", inf.GetStore().ListKeys())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNamespacedFake(t *testing.T) {
	fake := NewFake()
	cep := &v2.CiliumEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: "ns1"},
		Status: v2.EndpointStatus{ID: 7, Identity: &v2.EndpointIdentity{ID: 300}}}
	if _, err := fake.CiliumV2().CiliumEndpoints("ns1").Create(t.Context(), cep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, _ := fake.CiliumV2().CiliumEndpoints("ns2").List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Fatalf("ns2 sees %d endpoints", len(l.Items))
	}
	got, err := fake.CiliumV2().CiliumEndpoints("ns1").Get(t.Context(), "pod-a", metav1.GetOptions{})
	if err != nil || got.Status.Identity.ID != 300 {
		t.Fatalf("get: %v %v", got, err)
	}
}

func TestNewForConfig(t *testing.T) {
	cs, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if cs.CiliumV2().CiliumIdentities() == nil || cs.CiliumV2alpha1().CiliumEndpointSlices() == nil {
		t.Fatal("nil clients")
	}
}
