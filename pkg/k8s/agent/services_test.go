package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// The policy engine's readers share one following of the Services and
// EndpointSlices tables: whoever starts first starts it, all read the
// same tables, and a listener hears each change once.
func TestServiceSourceSharedWatch(t *testing.T) {
	kube := kubefake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db", Labels: map[string]string{"tier": "back"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "db"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}, AddressType: discoveryv1.AddressTypeIPv4},
	)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := statedb.New()
	tbls, err := tables.Start(ctx, db, &tables.Clients{Kube: kube, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	s := agent.NewServiceSource(db, tbls.Services, tbls.EndpointSlices)
	var mu sync.Mutex
	heard := map[loadbalancer.ServiceName]int{}
	s.OnChange(func(n loadbalancer.ServiceName) {
		mu.Lock()
		heard[n]++
		mu.Unlock()
	})
	if err := s.StartServices(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartServices(ctx); err != nil {
		t.Fatal(err)
	}
	if svc, ok := s.KubeService("a", "db"); !ok || svc.Labels["tier"] != "back" {
		t.Fatalf("KubeService a/db: %v %v", svc, ok)
	}
	if n := len(s.KubeServices("")); n != 2 {
		t.Fatalf("%d Services in every namespace, want 2", n)
	}
	if svcs := s.KubeServices("b"); len(svcs) != 1 || svcs[0].Namespace != "b" {
		t.Fatalf("Services of b: %v", svcs)
	}
	if es := s.EndpointSlices("a", "db"); len(es) != 1 || es[0].Name != "db-1" {
		t.Fatalf("EndpointSlices of a/db: %v", es)
	}

	mu.Lock()
	clear(heard)
	mu.Unlock()
	// Once the marker is heard, web was heard too (a handler hears in
	// order): once, not once per caller of StartServices.
	for _, name := range []string{"web", "marker"} {
		if _, err := kube.CoreV1().Services("c").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: name}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if heard[loadbalancer.ServiceName{Namespace: "c", Name: "marker"}] == 0 {
			return fmt.Errorf("c/marker not heard yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if n := heard[loadbalancer.ServiceName{Namespace: "c", Name: "web"}]; n != 1 {
		t.Fatalf("c/web heard %d times, want once", n)
	}
}
