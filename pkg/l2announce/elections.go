package l2announce

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationapi "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Timings are the Leases' timings, Cilium's flags.
type Timings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// elections campaign for the Leases of the Services this node may
// announce, one at a time per Service, and say which it holds. A change
// of what it holds fires changed.
type elections struct {
	log       *slog.Logger
	leases    coordinationv1.LeasesGetter
	namespace string
	identity  string // this node's name
	timings   Timings
	changed   *desired.Signal
	// onLead is told of every Lease this node takes; may be nil.
	onLead func(loadbalancer.ServiceName)

	mu      sync.Mutex
	running map[loadbalancer.ServiceName]*election
	// closed: stopped for good; sync starts nothing more.
	closed bool
}

type election struct {
	cancel  context.CancelFunc
	done    chan struct{}
	leading atomic.Bool
}

// sync campaigns for want's Services and for no other: a Service no longer
// wanted gives up its Lease at once (released, so that another candidate
// takes over without waiting for it to lapse).
func (e *elections) sync(want map[loadbalancer.ServiceName]bool) {
	e.mu.Lock()
	var stopping []*election
	for n, el := range e.running {
		if !want[n] {
			el.cancel()
			stopping = append(stopping, el)
			delete(e.running, n)
		}
	}
	for n := range want {
		if _, ok := e.running[n]; !ok && !e.closed {
			e.running[n] = e.start(n)
		}
	}
	e.mu.Unlock()
	for _, el := range stopping {
		<-el.done
	}
	if len(stopping) > 0 {
		e.changed.Fire()
	}
}

// leads says whether this node holds n's Lease.
func (e *elections) leads(n loadbalancer.ServiceName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	el, ok := e.running[n]
	return ok && el.leading.Load()
}

// stop gives up every Lease, for good.
func (e *elections) stop() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.sync(nil)
}

func (e *elections) start(n loadbalancer.ServiceName) *election {
	ctx, cancel := context.WithCancel(context.Background())
	el := &election{cancel: cancel, done: make(chan struct{})}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.namespace, Name: LeaseName(n)},
		Client:     e.leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
	}
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            lock.LeaseMeta.Name,
		LeaseDuration:   e.timings.LeaseDuration,
		RenewDeadline:   e.timings.RenewDeadline,
		RetryPeriod:     e.timings.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				el.leading.Store(true)
				e.log.Info("Announcing", "service", n, "lease", lock.LeaseMeta.Name)
				if e.onLead != nil {
					e.onLead(n)
				}
				e.changed.Fire()
			},
			OnStoppedLeading: func() {
				if el.leading.Swap(false) {
					e.log.Info("Stopped announcing", "service", n)
					e.changed.Fire()
				}
			},
		},
	}
	go func() {
		defer close(el.done)
		// A node that loses the Lease (the API server unreachable past
		// the renew deadline) campaigns again.
		for ctx.Err() == nil {
			le, err := leaderelection.NewLeaderElector(cfg)
			if err != nil {
				e.log.Error("L2 announcement election", "service", n, "error", err)
				return
			}
			le.Run(ctx)
		}
	}()
	return el
}

// collectLeases deletes the announcement Leases that no Service of
// exists names and nobody holds any more (released, or lapsed): a
// Service's Lease outlives the Service otherwise. exists says whether a
// Lease name is a current Service's.
func collectLeases(ctx context.Context, leases coordinationv1.LeaseInterface, exists func(name string) bool, now time.Time) (int, error) {
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range list.Items {
		if !strings.HasPrefix(l.Name, leasePrefix) || exists(l.Name) || held(&l, now) {
			continue
		}
		err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return n, err
		}
		n++
	}
	return n, nil
}

// held says whether someone holds l at now.
func held(l *coordinationapi.Lease, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}
