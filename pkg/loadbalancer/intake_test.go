package loadbalancer_test

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
)

// reads counts, by name, the services an intake reads: a pass reads
// each service it processes once.
type reads struct {
	mu sync.Mutex
	n  map[loadbalancer.ServiceName]int
}

// cell provides node-a's intake over the Kubernetes tables, counting
// its reads.
func (r *reads) cell() cell.Cell {
	return cell.Provide(func(svcs statedb.Table[*corev1.Service], slices statedb.Table[*discoveryv1.EndpointSlice],
		pods statedb.Table[*corev1.Pod], nodes statedb.Table[*corev1.Node]) *loadbalancer.Intake {
		in := lbk8s.NewIntake(svcs, slices, pods, nodes, "node-a")
		read := in.Service
		in.Service = func(txn statedb.ReadTxn, n loadbalancer.ServiceName) (loadbalancer.Service, []loadbalancer.Endpoint, bool) {
			r.mu.Lock()
			r.n[n]++
			r.mu.Unlock()
			return read(txn, n)
		}
		return in
	})
}

// take returns the reads so far and forgets them.
func (r *reads) take() map[loadbalancer.ServiceName]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := maps.Clone(r.n)
	clear(r.n)
	return out
}

// A change rewrites the service it touches alone: the first pass reads
// every Service once, then a changed EndpointSlice, a changed Service and
// a deleted one are each read once, and nothing else is.
func TestChangeProcessesItsServiceAlone(t *testing.T) {
	const services = 20
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var objs []runtime.Object
	name := func(i int) string { return fmt.Sprintf("s%d", i) }
	for i := range services {
		objs = append(objs, service(name(i), fmt.Sprintf("10.96.0.%d", 10+i), 1, 0, 0, t0),
			slice(name(i), fmt.Sprintf("10.244.%d.1", i), fmt.Sprintf("10.244.%d.2", i)))
	}
	r := &reads{n: map[loadbalancer.ServiceName]int{}}
	m := lbtest.New()
	lb := startLBWith(t, m, open(m), objs, r.cell())
	for i := range services {
		lb.waitWritten(t, name(i), 1)
	}
	first := r.take()
	for i := range services {
		if n := first[loadbalancer.ServiceName{Namespace: "default", Name: name(i)}]; n != 1 {
			t.Errorf("the first pass read %s %d times, want once", name(i), n)
		}
	}
	if len(first) != services {
		t.Errorf("the first pass read %d services, want %d: %v", len(first), services, first)
	}

	ctx := t.Context()
	only := func(svc string) {
		t.Helper()
		want := map[loadbalancer.ServiceName]int{{Namespace: "default", Name: svc}: 1}
		if got := r.take(); !maps.Equal(got, want) {
			t.Fatalf("read %v, want %v", got, want)
		}
	}
	if _, err := lb.kube.DiscoveryV1().EndpointSlices("default").Update(ctx,
		slice("s7", "10.244.7.1", "10.244.7.3"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitBackend(t, "s7", "10.244.7.3")
	only("s7")

	if _, err := lb.kube.CoreV1().Services("default").Update(ctx,
		service("s3", "10.96.0.13", 2, 0, 0, t0), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitWritten(t, "s3", 2)
	only("s3")

	if err := lb.kube.CoreV1().Services("default").Delete(ctx, "s5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitWritten(t, "s5", 0)
	only("s5")
}

// waitBackend waits until a frontend of the service has a backend at
// address a.
func (lb *lbHive) waitBackend(t *testing.T, svc, a string) {
	t.Helper()
	name := loadbalancer.ServiceName{Namespace: "default", Name: svc}
	testenv.Eventually(t, time.Minute, func() error {
		for r := range lb.frontends.List(lb.db.ReadTxn(), loadbalancer.FrontendServiceIndex.Query(name)) {
			for _, b := range r.Backends {
				if b.Address.String() == a {
					return nil
				}
			}
		}
		return fmt.Errorf("%s has no backend at %s yet", name, a)
	})
}
