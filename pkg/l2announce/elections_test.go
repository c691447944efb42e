package l2announce

import (
	"context"
	"log/slog"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Two nodes campaign for one Service's Lease: one holds it, under
// Cilium's name, and when it stops being a candidate it lets go at once,
// and the other takes over.
func TestElectionsOneHolderAndHandOver(t *testing.T) {
	kube := fake.NewClientset()
	timings := Timings{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	node := func(name string) *elections {
		e := &elections{log: slog.Default(), leases: kube.CoordinationV1(), namespace: "kube-system", identity: name,
			timings: timings, changed: desired.NewSignal(), running: map[loadbalancer.ServiceName]*election{}}
		t.Cleanup(e.stop)
		return e
	}
	web := loadbalancer.ServiceName{Namespace: "default", Name: "web"}
	a, b := node("node-a"), node("node-b")
	a.sync(map[loadbalancer.ServiceName]bool{web: true})
	waitFor(t, "node-a to lead", func() bool { return a.leads(web) })
	b.sync(map[loadbalancer.ServiceName]bool{web: true})
	time.Sleep(5 * timings.RetryPeriod)
	if b.leads(web) {
		t.Fatal("both nodes lead")
	}
	lease, err := kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "cilium-l2announce-default-web", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "node-a" {
		t.Fatalf("lease %+v: %v", lease, err)
	}

	// node-a stops being a candidate (its last local backend went): it
	// releases, and node-b takes over well before the Lease would lapse.
	start := time.Now()
	a.sync(nil)
	if a.leads(web) {
		t.Fatal("node-a still leads")
	}
	waitFor(t, "node-b to lead", func() bool { return b.leads(web) })
	if took := time.Since(start); took >= timings.LeaseDuration {
		t.Fatalf("hand-over took %s, the lease's whole duration", took)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCollectLeases(t *testing.T) {
	now := time.Now()
	lease := func(name, holder string, renewed time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
		if holder != "" {
			d := int32(15)
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d,
				RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}
		}
		return l
	}
	kube := fake.NewClientset(
		lease("cilium-l2announce-default-gone-held", "node-a", time.Second),   // a node announces it: kept
		lease("cilium-l2announce-default-gone-released", "", 0),               // released: deleted
		lease("cilium-l2announce-default-gone-lapsed", "node-a", time.Minute), // its holder died: deleted
		lease("cilium-l2announce-default-web", "", 0),                         // its Service is there: kept
		lease("cilium-operator-resource-lock", "op", time.Hour),               // not ours: kept
	)
	leases := kube.CoordinationV1().Leases("kube-system")
	n, err := collectLeases(context.Background(), leases, func(name string) bool {
		return name == LeaseName(loadbalancer.ServiceName{Namespace: "default", Name: "web"})
	}, now)
	if err != nil || n != 2 {
		t.Fatalf("collected %d: %v", n, err)
	}
	list, err := leases.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range list.Items {
		left = append(left, l.Name)
	}
	want := []string{"cilium-l2announce-default-gone-held", "cilium-l2announce-default-web", "cilium-operator-resource-lock"}
	if !reflect.DeepEqual(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}
