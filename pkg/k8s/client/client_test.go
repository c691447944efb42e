package client

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

func TestInformerAndLister(t *testing.T) {
	fake := NewFake(&v2.CiliumIdentity{ObjectMeta: metav1.ObjectMeta{Name: "256"},
		SecurityLabels: map[string]string{"k8s:app": "a"}})
	inf := NewCiliumIdentityInformer(fake, 0, nil)
	lister := NewLister[*v2.CiliumIdentity](inf, v2.CIDPluralName)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go inf.Run(stop)
	// A deadline, so that an informer that never syncs fails the test instead of hanging it.
	syncCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("cache did not sync within 30s")
	}
	if _, err := fake.CiliumV2().CiliumIdentities().Create(t.Context(), &v2.CiliumIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "257"}, SecurityLabels: map[string]string{"k8s:app": "b"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := lister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lister has %d identities, want 2", len(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
	id, err := lister.Get("257")
	if err != nil || id.SecurityLabels["k8s:app"] != "b" {
		t.Fatalf("get 257: %v %v", id, err)
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
