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
	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

func nodeLeaseObj(node, holder string, renew time.Time, devices string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodeLeasePrefix + node, Namespace: "kube-system",
		Labels: map[string]string{tables.NodeLeaseLabel: node}, Annotations: map[string]string{devicesAnnotation: devices}}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	r := metav1.NewMicroTime(renew)
	l.Spec.RenewTime = &r
	return l
}

// A peer is live while its Lease moves, by this node's clock: a Lease
// renewed by a clock an hour behind is live, one that stopped moving
// lapses after the lease duration, one released or held by another is
// not a live node.
func TestPeersLive(t *testing.T) {
	p := &peers{leaseDuration: 15 * time.Second}
	now := time.Now()
	skewed := now.Add(-time.Hour)
	leases := []*coordinationv1.Lease{
		nodeLeaseObj("a", "a", skewed, "eth0"),
		nodeLeaseObj("b", "b", now, "eth0,eth1"),
		nodeLeaseObj("c", "", now, "eth0"),      // released
		nodeLeaseObj("d", "other", now, "eth0"), // not its own
	}
	live, next := p.live(leases, now)
	if want := map[string][]string{"a": {"eth0"}, "b": {"eth0", "eth1"}}; !reflect.DeepEqual(live, want) {
		t.Fatalf("live %v, want %v", live, want)
	}
	if !next.Equal(now.Add(15 * time.Second)) {
		t.Fatalf("next lapse %s, want %s", next, now.Add(15*time.Second))
	}
	// 10 s on, b renewed and a did not: both live still.
	leases[1] = nodeLeaseObj("b", "b", now.Add(10*time.Second), "eth0,eth1")
	if live, _ := p.live(leases, now.Add(10*time.Second)); len(live) != 2 {
		t.Fatalf("live at +10s %v", live)
	}
	// 16 s on: a lapsed (its Lease has not moved since we first saw it).
	live, next = p.live(leases, now.Add(16*time.Second))
	if _, ok := live["a"]; ok || len(live) != 1 {
		t.Fatalf("live at +16s %v, want b only", live)
	}
	if !next.Equal(now.Add(25 * time.Second)) {
		t.Fatalf("next lapse %s, want b's at +25s", next)
	}
}

// The node's Lease: created with its label and devices, renewed with one
// write per period, released when it stops.
func TestNodeLease(t *testing.T) {
	kube := fake.NewClientset()
	leases := kube.CoordinationV1().Leases("kube-system")
	l := &nodeLease{log: slog.Default(), leases: leases, node: "n1", devices: []string{"eth0"},
		timings: Timings{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 50 * time.Millisecond},
		changed: desired.NewSignal()}
	l.start()
	waitFor(t, "the node lease live", l.live.Load)
	got, err := leases.Get(context.Background(), "cilium-l2node-n1", metav1.GetOptions{})
	if err != nil || got.Labels[tables.NodeLeaseLabel] != "n1" || got.Annotations[devicesAnnotation] != "eth0" ||
		got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "n1" || *got.Spec.LeaseDurationSeconds != 2 {
		t.Fatalf("lease %+v: %v", got, err)
	}
	first := got.Spec.RenewTime.Time
	waitFor(t, "a renewal", func() bool {
		got, _ = leases.Get(context.Background(), "cilium-l2node-n1", metav1.GetOptions{})
		return got.Spec.RenewTime.After(first)
	})
	l.stop()
	got, err = leases.Get(context.Background(), "cilium-l2node-n1", metav1.GetOptions{})
	if err != nil || got.Spec.HolderIdentity != nil || l.live.Load() {
		t.Fatalf("after stop: lease %+v, live %v: %v", got.Spec, l.live.Load(), err)
	}
}
