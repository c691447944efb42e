package loadbalancer_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
)

// A Service with more frontends than the maps hold is refused alone,
// with a warning on it; the other Services are written, before it and
// after it; once it goes, a Service that did not fit beside it gets its
// room and numbers, without a restart. The reconcilers never meet a full
// map.
func TestServiceTooLargeRefusedAlone(t *testing.T) {
	m := lbtest.New()
	testServiceTooLarge(t, m)
	if n := m.Full(); n != 0 {
		t.Fatalf("the reconcilers met a full map %d times", n)
	}
	services, backends, revNATs := m.Entries()
	t.Logf("maps at the end: %d service entries, %d backends, %d reverse NATs", services, backends, revNATs)
}

// After a restart the maps still hold what the previous run wrote for a
// Service deleted meanwhile, until the reconcilers prune it: a Service
// that fits only once that is gone waits for it, and no write meets a
// full map.
func TestRestartLeftoversNeverFillMaps(t *testing.T) {
	m := lbtest.NewWithMax(1024)
	gone := spec.Service{Frontend: spec.Frontend{Address: netip.MustParseAddr("10.96.9.9"), Port: 80, Protocol: spec.ProtoTCP},
		RevNATIndex: 1}
	for id := spec.BackendID(1); id <= 1000; id++ {
		b := spec.Backend{ID: id, Address: netip.AddrFrom4([4]byte{10, 250, byte(id >> 8), byte(id)}), Port: 80, Protocol: spec.ProtoTCP}
		if err := m.UpsertBackend(b); err != nil {
			t.Fatal(err)
		}
		gone.Backends = append(gone.Backends, id)
	}
	if err := m.UpsertService(gone); err != nil {
		t.Fatal(err)
	}
	if err := m.UpsertRevNAT(spec.RevNAT{Index: 1, Address: gone.Frontend.Address, Port: 80}); err != nil {
		t.Fatal(err)
	}
	// Both are there when the agent starts; beside what the maps hold,
	// a fits and wide does not.
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lb := startLB(t, m, []runtime.Object{service("a", "10.96.0.1", 1, 0, 0, t0), service("wide", "10.96.0.2", 30, 0, 0, t0)},
		"bpf-lb-map-max=1024")
	lb.waitWritten(t, "a", 1)
	lb.waitWritten(t, "wide", 30)
	lb.waitMaps(t)
	if n := m.Full(); n != 0 {
		t.Fatalf("the reconcilers met a full map %d times", n)
	}
}

func TestPrivilegedServiceTooLargeRefusedAlone(t *testing.T) {
	testenv.Privileged(t)
	testServiceTooLarge(t, dptest.StartNode(t, testenv.NewNetNS(t)).Maps())
}

// lbHive is a load balancer over a fake API server and maps m.
type lbHive struct {
	kube      kubernetes.Interface
	db        *statedb.DB
	frontends statedb.Table[*loadbalancer.FrontendRow]
	backends  statedb.Table[*loadbalancer.BackendRow]
	m         loadbalancer.Map
	health    *health.Registry
}

// startLB starts the load balancer over an API server that holds objs;
// flags are "name=value".
func startLB(t *testing.T, m loadbalancer.Map, objs []runtime.Object, flags ...string) *lbHive {
	return startLBWith(t, m, open(m), objs, lbk8s.Cell, flags...)
}

// open is m, open from the start.
func open(m loadbalancer.Map) loadbalancer.MapSource { return func() loadbalancer.Map { return m } }

// startLBWith is startLB with the maps as source gives them, and the
// cell that provides the intake.
func startLBWith(t *testing.T, m loadbalancer.Map, source loadbalancer.MapSource, objs []runtime.Object, intake cell.Cell,
	flags ...string) *lbHive {
	kube := kubefake.NewClientset(objs...)
	lb := &lbHive{kube: kube, m: m}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := health.NewHive(
		job.Cell, statedb.Cell, health.Cell,
		kubeCells(kube), intake, loadbalancer.Cell,
		cell.Provide(
			func() loadbalancer.MapSource { return source },
			func() loadbalancer.NodeAddresses { return loadbalancer.NodeAddresses{nodeIP} },
			func() loadbalancer.ListenFunc { return lbtest.NewNet().Listen },
		),
		cell.Invoke(func(db *statedb.DB, f statedb.Table[*loadbalancer.FrontendRow], b statedb.Table[*loadbalancer.BackendRow],
			r *health.Registry) {
			lb.db, lb.frontends, lb.backends, lb.health = db, f, b, r
		}),
	)
	h.Viper().Set("kube-proxy-replacement", "true")
	for _, f := range flags {
		k, v, _ := strings.Cut(f, "=")
		h.Viper().Set(k, v)
	}
	log := hivetest.Logger(t)
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return lb
}

// service is a Service with a ClusterIP and ports 1..ports, each at the
// ClusterIP and at every external IP 203.0.ip/8... of ips.
func service(name, clusterIP string, ports, firstIP, ips int, created time.Time) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}}}
	for p := 1; p <= ports; p++ {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "p" + strconv.Itoa(p), Protocol: corev1.ProtocolTCP,
			Port: int32(p)})
	}
	for i := firstIP; i < firstIP+ips; i++ {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, fmt.Sprintf("203.%d.%d.1", i/256, i%256))
	}
	return svc
}

// slice gives port p1 of a service two ready endpoints.
func slice(svc, addr1, addr2 string) *discoveryv1.EndpointSlice {
	name, port, yes := "p1", int32(8080), true
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{addr1}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{Addresses: []string{addr2}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}}}
}

func testServiceTooLarge(t *testing.T, m loadbalancer.Map) {
	lb := startLB(t, m, nil)
	ctx := t.Context()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	create := func(objs ...any) {
		t.Helper()
		for _, o := range objs {
			var err error
			switch o := o.(type) {
			case *corev1.Service:
				_, err = lb.kube.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *discoveryv1.EndpointSlice:
				_, err = lb.kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	// a is written; then big, 256 ports at its ClusterIP and at 256
	// ExternalIPs, 65,792 frontends: more than the 65,535 reverse NAT
	// indexes and the 65,536 entries of the services map.
	create(service("a", "10.96.0.1", 1, 0, 0, t0), slice("a", "10.244.1.1", "10.244.1.2"))
	lb.waitWritten(t, "a", 1)
	create(service("big", "10.96.0.100", 256, 0, 256, t0))
	create(service("b", "10.96.0.2", 1, 0, 0, t0), slice("b", "10.244.2.1", "10.244.2.2"))
	lb.waitWritten(t, "b", 1)
	lb.waitWritten(t, "a", 1)
	lb.waitWritten(t, "big", 0)
	lb.waitEvent(t, "big", loadbalancer.ReasonServiceRefused)

	// big shrinks to 256 x 128 ExternalIPs, which fits, and is written;
	// then d, as large, does not fit beside it.
	bigger := service("big", "10.96.0.100", 256, 0, 128, t0)
	if _, err := lb.kube.CoreV1().Services("default").Update(ctx, bigger, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitWritten(t, "big", 256*129)
	create(service("d", "10.96.0.200", 256, 1000, 128, t0))
	lb.waitEvent(t, "d", loadbalancer.ReasonServiceRefused)
	lb.waitWritten(t, "d", 0)

	// big goes: its room and numbers are d's once the maps let go of it.
	if err := lb.kube.CoreV1().Services("default").Delete(ctx, "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitWritten(t, "big", 0)
	lb.waitWritten(t, "d", 256*129)
	lb.waitWritten(t, "a", 1)
	lb.waitWritten(t, "b", 1)
	lb.waitMaps(t)
}

// waitWritten waits until the service has n frontends in the table, all
// of them in the maps.
func (lb *lbHive) waitWritten(t *testing.T, svc string, n int) {
	t.Helper()
	name := loadbalancer.ServiceName{Namespace: "default", Name: svc}
	testenv.Eventually(t, 2*time.Minute, func() error {
		got, done := 0, 0
		for r := range lb.frontends.List(lb.db.ReadTxn(), loadbalancer.FrontendServiceIndex.Query(name)) {
			got++
			if r.Status.Kind == reconciler.StatusKindDone {
				done++
			}
		}
		if got != n || done != n {
			return fmt.Errorf("%s: %d frontends, %d of them in the maps; want %d", name, got, done, n)
		}
		return nil
	})
}

// waitMaps waits until the maps hold exactly what the tables say: the
// frontends' entries and reverse translations, and the backends.
func (lb *lbHive) waitMaps(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		txn := lb.db.ReadTxn()
		svcs, err := lb.m.Services()
		if err != nil {
			return err
		}
		revs, err := lb.m.RevNATs()
		if err != nil {
			return err
		}
		backends, err := lb.m.Backends()
		if err != nil {
			return err
		}
		rows, backendRows := lb.frontends.NumObjects(txn), lb.backends.NumObjects(txn)
		if len(svcs) != rows || len(revs) != rows || len(backends) != backendRows {
			return fmt.Errorf("maps: %d frontends, %d reverse NATs, %d backends; tables: %d frontends, %d backends",
				len(svcs), len(revs), len(backends), rows, backendRows)
		}
		return nil
	})
}

// waitEvent waits for a warning with reason on the Service.
func (lb *lbHive) waitEvent(t *testing.T, svc, reason string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		evs, err := lb.kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Service" && e.InvolvedObject.Name == svc && e.Reason == reason &&
				e.Type == corev1.EventTypeWarning {
				t.Logf("event on %s: %s: %s", svc, e.Reason, e.Message)
				return nil
			}
		}
		return fmt.Errorf("no %s event on Service %s among %d events", reason, svc, len(evs.Items))
	})
}

// A Service that fills the maps can still change: what it lets go of
// makes room for what it takes. Its rows that go are written before
// those that come, so the services map never holds more than it may.
func TestFullMapsServiceStillChanges(t *testing.T) {
	m := lbtest.NewWithMax(1024)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// full: a ClusterIP and 1,023 ExternalIPs, every entry of the
	// services and reverse NAT maps.
	lb := startLB(t, m, []runtime.Object{service("full", "10.96.0.1", 1, 0, 1023, t0)}, "bpf-lb-map-max=1024")
	lb.waitWritten(t, "full", 1024)
	moved := service("full", "10.96.0.1", 1, 2000, 1023, t0)
	if _, err := lb.kube.CoreV1().Services("default").Update(t.Context(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		txn := lb.db.ReadTxn()
		a := loadbalancer.Addr{Address: netip.MustParseAddr("203.7.208.1"), Port: 1, Protocol: spec.ProtoTCP}
		if r, _, ok := lb.frontends.Get(txn, loadbalancer.FrontendAddrIndex.Query(a)); !ok || r.Status.Kind != reconciler.StatusKindDone {
			return fmt.Errorf("%s not written yet", a)
		}
		return nil
	})
	lb.waitWritten(t, "full", 1024)
	lb.waitMaps(t)
	if n := m.Full(); n != 0 {
		t.Fatalf("the reconcilers met a full map %d times", n)
	}
}

// A Service whose backends fill the backends map can swap them all for
// others. Backends are written by two reconcilers, the frontends' (a
// frontend's before its slots) and the backends', in no set order: the
// frontends' may meet the old backends still there, and retries until
// the backends' has removed them.
func TestFullMapsServiceSwapsBackends(t *testing.T) {
	m := lbtest.NewWithMax(1024)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lb := startLB(t, m, []runtime.Object{service("s", "10.96.0.1", 1, 0, 0, t0), manyEndpoints("s", 0, 1000)},
		"bpf-lb-map-max=1024")
	lb.waitWritten(t, "s", 1)
	lb.waitMaps(t)
	if _, err := lb.kube.DiscoveryV1().EndpointSlices("default").Update(t.Context(), manyEndpoints("s", 5000, 1000),
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		backends, err := m.Backends()
		if err != nil {
			return err
		}
		for _, b := range backends {
			if b.Address.As4()[2] < 19 { // 10.100.19.136 is the 5000th
				return fmt.Errorf("backend %s of before still in the map", b.Address)
			}
		}
		if len(backends) != 1000 {
			return fmt.Errorf("%d backends in the map, want 1000", len(backends))
		}
		return nil
	})
	lb.waitWritten(t, "s", 1)
	lb.waitMaps(t)
	t.Logf("writes retried for a full map: %d", m.Full())
}

// manyEndpoints gives port p1 of a service n ready endpoints, from
// 10.100.0.0 + first on.
func manyEndpoints(svc string, first, n int) *discoveryv1.EndpointSlice {
	es := slice(svc, "10.0.0.1", "10.0.0.2")
	es.Endpoints = nil
	yes := true
	for i := first; i < first+n; i++ {
		ip := netip.AddrFrom4([4]byte{10, byte(100 + i>>16), byte(i >> 8), byte(i)})
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes}})
	}
	return es
}
