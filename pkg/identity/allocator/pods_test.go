package allocator

import (
	"context"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/labels"
)

var discard = slog.New(slog.DiscardHandler)

func newPodIdentities(t *testing.T, cilium *client.Fake, objs ...runtime.Object) *PodIdentities {
	t.Helper()
	alloc, err := NewAllocator(cilium.CiliumV2().CiliumIdentities(), discard, AllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return NewPodIdentities(kubefake.NewClientset(objs...), alloc, labels.DefaultFilter(), "default")
}

func TestPodIdentityLabels(t *testing.T) {
	ctx := context.Background()
	objs := []runtime.Object{
		k8stest.Namespace("shop", map[string]string{"team": "blue"}),
		k8stest.Pod("shop", "web", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "web-sa" }),
	}
	cilium := client.NewFake()
	a := newPodIdentities(t, cilium, objs...)
	num, err := a.Allocate(ctx, endpoint.Pod{Namespace: "shop", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if num < identity.MinClusterIdentity {
		t.Fatalf("identity %d: want a cluster identity", num)
	}
	id, ok := a.Identity(endpoint.Pod{Namespace: "shop", Name: "web"})
	if !ok || id.ID != num {
		t.Fatalf("Identity() = %v, %v; want %d", id, ok, num)
	}
	for _, want := range []string{
		"k8s:app=web",
		"k8s:io.kubernetes.pod.namespace=shop",
		"k8s:io.cilium.k8s.namespace.labels.team=blue",
		"k8s:io.cilium.k8s.policy.serviceaccount=web-sa",
	} {
		if !id.Labels.Has(labels.Parse(want)) {
			t.Errorf("labels %v lack %s", id.Labels, want)
		}
	}
	obj, err := cilium.CiliumV2().CiliumIdentities().Get(ctx, id.ID.String(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CiliumIdentity %d: %v", num, err)
	}
	if got := obj.SecurityLabels["k8s:app"]; got != "web" {
		t.Errorf("CiliumIdentity security labels %v: want k8s:app=web", obj.SecurityLabels)
	}

	if err := a.Release(ctx, endpoint.Pod{Namespace: "shop", Name: "web"}, num); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Identity(endpoint.Pod{Namespace: "shop", Name: "web"}); ok {
		t.Error("identity still held after Release")
	}
}

// Two agents (two allocators, one API server) give pods with the same
// labels the same identity, and pods with other labels another.
func TestPodIdentitySharedAcrossAgents(t *testing.T) {
	ctx := context.Background()
	objs := []runtime.Object{
		k8stest.Namespace("shop", nil),
		k8stest.Pod("shop", "web-1", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }),
		k8stest.Pod("shop", "web-2", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Spec.NodeName = "node-b"
		}),
		k8stest.Pod("shop", "db", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }),
	}
	cilium := client.NewFake()
	agentA := newPodIdentities(t, cilium, objs...)
	agentB := newPodIdentities(t, cilium, objs...)

	web1, err := agentA.Allocate(ctx, endpoint.Pod{Namespace: "shop", Name: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	web2, err := agentB.Allocate(ctx, endpoint.Pod{Namespace: "shop", Name: "web-2"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := agentB.Allocate(ctx, endpoint.Pod{Namespace: "shop", Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if web1 != web2 {
		t.Errorf("same labels on two agents: identities %d and %d", web1, web2)
	}
	if db == web1 {
		t.Errorf("different labels share identity %d", db)
	}
	list, err := cilium.CiliumV2().CiliumIdentities().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d CiliumIdentities, want 2", len(list.Items))
	}
}

func TestPodIdentityErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		objs    []runtime.Object
		pod     endpoint.Pod
		want    identity.NumericIdentity
		wantErr bool
	}{
		{name: "no pod name keeps init", pod: endpoint.Pod{}, want: identity.Init},
		{name: "missing pod", objs: []runtime.Object{k8stest.Namespace("shop", nil)},
			pod: endpoint.Pod{Namespace: "shop", Name: "gone"}, wantErr: true},
		{name: "missing namespace", objs: []runtime.Object{k8stest.Pod("shop", "web")},
			pod: endpoint.Pod{Namespace: "shop", Name: "web"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newPodIdentities(t, client.NewFake(), tt.objs...)
			got, err := a.Allocate(ctx, tt.pod)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Allocate() error %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("Allocate() = %d, want %d", got, tt.want)
			}
		})
	}
}
