package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cilium-go/cilium/bench/internal/benchlab"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/health"
	k8stables "github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
	"github.com/cilium-go/cilium/pkg/loadbalancer/lbtest"
)

const (
	cpNamespace = "bench"
	cpNodeName  = "node-a"
	// changeWait bounds the wait for one change to reach the map; a
	// change not there by then counts as lost.
	changeWait = 5 * time.Second
)

// cpResults is what the control-plane part measured.
type cpResults struct {
	services, backends int
	// create is how long the creates took (the fake clientset's own
	// pace: it computes managed fields); program is the time from the
	// first create to every frontend and backend in the BPF maps.
	create, program time.Duration
	// updates are the clientset's update calls' own durations, which the
	// changes' times include.
	updates []time.Duration
	// changes holds, sorted, each EndpointSlice change's time from the
	// clientset's update to its new backend in the maps; lost counts the
	// changes not there within changeWait.
	changes []time.Duration
	lost    int
	rate    int
	// Heap in use and live heap after a GC, before the Services and with
	// them; apiShare is what the fake clientset's own copy of the objects
	// takes, measured alone beforehand (a real API server holds it, not
	// the agent).
	inuseBase, inuseFull, liveBase, liveFull uint64
	apiShare                                 uint64
}

// cpObjects makes Services and their EndpointSlices; moved[k] replaces the
// address of backend k.
type cpObjects struct {
	services, perService int
	moved                map[int]netip.Addr
}

func (o *cpObjects) name(i int) string { return fmt.Sprintf("svc-%05d", i) }

func (o *cpObjects) service(i int) *corev1.Service {
	ip := netip.AddrFrom4([4]byte{10, 96, byte(1 + i/250), byte(1 + i%250)}).String()
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: o.name(i), Namespace: cpNamespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// backendAddr is backend k's address, unless a change moved it.
func (o *cpObjects) backendAddr(k int) netip.Addr {
	if a, ok := o.moved[k]; ok {
		return a
	}
	return netip.AddrFrom4([4]byte{10, byte(128 + k>>16), byte(k >> 8), byte(k)})
}

func (o *cpObjects) slice(i int) *discoveryv1.EndpointSlice {
	yes, no, port, proto, name, node := true, false, int32(8080), corev1.ProtocolTCP, "http", cpNodeName
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: o.name(i) + "-1", Namespace: cpNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: o.name(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for j := range o.perService {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{o.backendAddr(i*o.perService + j).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
			NodeName:   &node,
		})
	}
	return es
}

// create puts every Service and EndpointSlice in through the clientset.
func (o *cpObjects) create(ctx context.Context, kube kubernetes.Interface) error {
	for i := range o.services {
		if _, err := kube.CoreV1().Services(cpNamespace).Create(ctx, o.service(i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create service %d: %w", i, err)
		}
		if _, err := kube.DiscoveryV1().EndpointSlices(cpNamespace).Create(ctx, o.slice(i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create endpoint slice %d: %w", i, err)
		}
	}
	return nil
}

// heap is the heap in use and the live heap after a collection.
func heap() (inuse, live uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.HeapAlloc
}

// quietFake is a fake clientset whose watches of the kinds the benchmark
// never writes (the agent watches Pods, Namespaces, Nodes and
// NetworkPolicies too) have no buffer: each fake watch holds a buffer of
// watch.DefaultChanSize events, 2 MiB at the size the Service creates
// need, which a real API server's watch does not cost the agent.
func quietFake() *kubefake.Clientset {
	kube := kubefake.NewClientset()
	kube.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		switch a.GetResource().Resource {
		case "services", "endpointslices":
			return false, nil, nil
		}
		return true, watch.NewFake(), nil
	})
	return kube
}

// lbHive is pkg/loadbalancer's cell on a real datapath's maps, fed by the
// agent's Service source from a fake clientset.
type lbHive struct {
	db        *statedb.DB
	frontends statedb.Table[*loadbalancer.FrontendRow]
	backends  statedb.Table[*loadbalancer.BackendRow]
}

func measureControlPlane(ctx context.Context, log *slog.Logger, o options, onClose func(func() error)) (*cpResults, error) {
	res := &cpResults{services: o.cpServices, backends: o.cpServices * o.cpBackends, rate: o.cpRate}
	objs := &cpObjects{services: o.cpServices, perService: o.cpBackends, moved: map[int]netip.Addr{}}
	// The fake clientset's watchers panic when their buffer is full; the
	// reflectors drain them, but 20,000 creates outrun them.
	watch.DefaultChanSize = 1 << 16

	log.Info("control plane: the fake API server's share of the heap", "services", o.cpServices)
	_, before := heap()
	alone := kubefake.NewClientset()
	if err := objs.create(ctx, alone); err != nil {
		return nil, err
	}
	_, after := heap()
	res.apiShare = after - min(before, after)
	runtime.KeepAlive(alone)
	alone = nil

	c, err := dptest.New(dptest.Options{Mode: spec.Native, Nodes: 1, PodsPerNode: 1})
	if err != nil {
		return nil, err
	}
	onClose(c.Close)
	m := c.Nodes[0].DP.Maps()
	kube := quietFake()
	var lb lbHive
	h := health.NewHive(
		job.Cell, statedb.Cell, health.Cell,
		k8stables.Cell, lbk8s.Cell, loadbalancer.Cell,
		cell.Provide(
			func() loadbalancer.MapSource { return func() loadbalancer.Map { return m } },
			func() loadbalancer.NodeAddresses { return loadbalancer.NodeAddresses{c.Nodes[0].IP} },
			func() *k8stables.Clients { return &k8stables.Clients{Kube: kube, NodeName: cpNodeName} },
			// healthCheckNodePorts (none here) listen in memory, never on the machine.
			func() loadbalancer.ListenFunc { return lbtest.NewNet().Listen },
		),
		cell.Invoke(func(db *statedb.DB, f statedb.Table[*loadbalancer.FrontendRow], b statedb.Table[*loadbalancer.BackendRow]) {
			lb = lbHive{db: db, frontends: f, backends: b}
		}),
	)
	h.Viper().Set("kube-proxy-replacement", "true")
	// The hive's own start and stop lines are not the benchmark's.
	hlog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("hive", "loadbalancer")
	if err := h.Start(hlog, ctx); err != nil {
		return nil, fmt.Errorf("start the load balancer: %w", err)
	}
	onClose(func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return h.Stop(hlog, stopCtx)
	})
	if err := lb.waitProgrammed(ctx, 0, 0, time.Minute); err != nil {
		return nil, fmt.Errorf("empty start: %w", err)
	}
	res.inuseBase, res.liveBase = heap()

	log.Info("control plane: creating Services and EndpointSlices", "services", o.cpServices, "backends", res.backends)
	t0 := time.Now()
	if err := objs.create(ctx, kube); err != nil {
		return nil, err
	}
	res.create = time.Since(t0)
	if err := lb.waitProgrammed(ctx, res.services, res.backends, 5*time.Minute); err != nil {
		return nil, err
	}
	res.program = time.Since(t0)
	if err := mapsHold(m, res.services, res.backends); err != nil {
		return nil, err
	}
	res.inuseFull, res.liveFull = heap()
	log.Info("control plane: programmed", "took", res.program.Round(time.Millisecond))

	log.Info("control plane: changing EndpointSlices", "per-second", o.cpRate, "for", o.cpDuration)
	if err := lb.changes(ctx, kube, m, objs, o, res); err != nil {
		return nil, err
	}
	return res, nil
}

// waitProgrammed waits until the tables hold the frontends and backends
// wanted, every one reconciled into the maps.
func (lb lbHive) waitProgrammed(ctx context.Context, frontends, backends int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		txn := lb.db.ReadTxn()
		fDone, fAll := countDone(lb.frontends.All(txn), func(r *loadbalancer.FrontendRow) reconciler.Status { return r.Status })
		bDone, bAll := countDone(lb.backends.All(txn), func(r *loadbalancer.BackendRow) reconciler.Status { return r.Status })
		init, _ := lb.frontends.Initialized(txn)
		if init && fDone == frontends && fAll == frontends && bDone == backends && bAll == backends {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %d of %d frontends and %d of %d backends in the maps", limit, fDone, frontends, bDone, backends)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func countDone[T any](rows func(func(T, statedb.Revision) bool), status func(T) reconciler.Status) (done, all int) {
	for r := range rows {
		all++
		if status(r).Kind == reconciler.StatusKindDone {
			done++
		}
	}
	return done, all
}

// mapsHold checks the BPF maps themselves.
func mapsHold(m benchlab.Maps, services, backends int) error {
	svcs, err := m.Services()
	if err != nil {
		return err
	}
	bs, err := m.Backends()
	if err != nil {
		return err
	}
	if len(svcs) != services || len(bs) != backends {
		return fmt.Errorf("the maps hold %d services and %d backends, want %d and %d", len(svcs), len(bs), services, backends)
	}
	return nil
}

// changes moves one backend of a Service to a new address, o.cpRate times
// a second for o.cpDuration, and times each from the clientset's update to
// the maps holding the new backend in the frontend's slots.
func (lb lbHive) changes(ctx context.Context, kube kubernetes.Interface, m benchlab.Maps, objs *cpObjects,
	o options, res *cpResults) error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	tick := time.NewTicker(time.Second / time.Duration(o.cpRate))
	defer tick.Stop()
	n := int(o.cpDuration.Seconds() * float64(o.cpRate))
	for i := range n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-tick.C:
		}
		// A prime stride visits Services far apart in the table.
		svc := i * 7919 % objs.services
		k := svc*objs.perService + i%objs.perService
		to := netip.AddrFrom4([4]byte{10, byte(200 + i>>16), byte(i >> 8), byte(i)})
		objs.moved[k] = to
		t0 := time.Now()
		if _, err := kube.DiscoveryV1().EndpointSlices(cpNamespace).Update(ctx, objs.slice(svc), metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update endpoint slice %d: %w", svc, err)
		}
		res.updates = append(res.updates, time.Since(t0))
		name := loadbalancer.ServiceName{Namespace: cpNamespace, Name: objs.name(svc)}
		wg.Go(func() {
			d, err := lb.waitBackend(ctx, m, name, to, t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errLost):
				res.lost++
			case err != nil:
				errs = append(errs, err)
			default:
				res.changes = append(res.changes, d)
			}
		})
	}
	wg.Wait()
	slices.Sort(res.changes)
	slices.Sort(res.updates)
	return errors.Join(errs...)
}

var errLost = errors.New("change not in the maps in time")

// waitBackend waits for the service's frontend to be reconciled with a
// backend at addr, then confirms it in the maps: the backend's entry and
// a slot of the frontend naming it.
func (lb lbHive) waitBackend(ctx context.Context, m benchlab.Maps, name loadbalancer.ServiceName, addr netip.Addr,
	t0 time.Time) (time.Duration, error) {
	deadline := time.NewTimer(time.Until(t0.Add(changeWait)))
	defer deadline.Stop()
	for {
		rows, watch := lb.frontends.ListWatch(lb.db.ReadTxn(), loadbalancer.FrontendServiceIndex.Query(name))
		reconciled := false
		for r := range rows {
			if r.Status.Kind != reconciler.StatusKindDone {
				continue
			}
			for _, b := range r.BackendSpecs {
				if b.Address != addr {
					continue
				}
				reconciled = true
				ok, err := inMaps(m, r, b)
				if err != nil {
					return 0, err
				}
				if ok {
					return time.Since(t0), nil
				}
			}
		}
		var poll <-chan time.Time
		if reconciled {
			// Done in the table and not yet in the map would be a bug;
			// the map is read again rather than waiting for the table.
			poll = time.After(time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-deadline.C:
			return 0, errLost
		case <-watch:
		case <-poll:
		}
	}
}

// inMaps says whether the backend is in the backends map and in one of
// the frontend's slots.
func inMaps(m benchlab.Maps, r *loadbalancer.FrontendRow, b spec.Backend) (bool, error) {
	// A read racing the agent's write of the same frontend may find a
	// slot gone: not there yet, and the caller reads again.
	bs, err := m.ServiceBackends(spec.Frontend{Address: r.Address, Port: r.Port, Protocol: r.Protocol})
	if err != nil {
		return false, nil
	}
	return slices.ContainsFunc(bs, func(got spec.Backend) bool { return got.ID == b.ID && got.Address == b.Address }), nil
}
