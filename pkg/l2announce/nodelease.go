package l2announce

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationapi "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
)

// With --l2-announcements-election=node, each node renews one Lease of
// its own, whatever the number of Services, and every node reads them
// all: a node is live while its Lease is renewed, and each Service goes
// to one of the live nodes that may announce it (Owners). A node that
// dies is dropped by the others once its Lease has not moved for the
// lease duration, as a Service's Lease would lapse; one that stops
// releases its Lease, and the others take over at once.

// nodeLeasePrefix starts a node's Lease's name; no Service's Lease name
// can start with it.
const nodeLeasePrefix = "cilium-l2node-"

// devicesAnnotation lists, on a node's Lease, the devices it can announce
// on, so that the others know where it would answer.
const devicesAnnotation = "l2announce.cilium.io/devices"

// nodeLease keeps this node's Lease renewed.
type nodeLease struct {
	log     *slog.Logger
	leases  coordinationv1.LeaseInterface
	node    string
	devices []string
	timings Timings
	changed *desired.Signal

	// live: the Lease was renewed within the renew deadline, so that the
	// others see this node as live.
	live atomic.Bool
	// held is the Lease as last written; nil: read it again.
	held *coordinationapi.Lease

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *nodeLease) name() string { return nodeLeasePrefix + l.node }

// start renews the Lease every retry period until stop.
func (l *nodeLease) start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.mu.Lock()
	l.cancel, l.done = cancel, make(chan struct{})
	l.mu.Unlock()
	go func() {
		defer close(l.done)
		var lastOK time.Time
		t := time.NewTicker(l.timings.RetryPeriod)
		defer t.Stop()
		for {
			now := time.Now()
			if err := l.renew(ctx, now); err != nil {
				l.held = nil
				l.log.Debug("L2 announcement node Lease not renewed", "error", err)
			} else {
				lastOK = now
			}
			if live := time.Since(lastOK) < l.timings.RenewDeadline; l.live.Swap(live) != live {
				l.log.Info("L2 announcement node Lease", "live", live)
				l.changed.Fire()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stop ends the renewals and releases the Lease, so that the others take
// this node's Services over at once.
func (l *nodeLease) stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	l.live.Store(false)
	if l.held == nil {
		return
	}
	ctx, cancelRelease := context.WithTimeout(context.Background(), l.timings.RenewDeadline)
	defer cancelRelease()
	rel := l.held.DeepCopy()
	rel.Spec.HolderIdentity = nil
	if _, err := l.leases.Update(ctx, rel, metav1.UpdateOptions{}); err != nil {
		l.log.Warn("L2 announcement node Lease not released; the others wait for it to lapse", "error", err)
	}
}

// renew writes the Lease as held by this node now: one update, from the
// Lease as last written; a read first only after a failure.
func (l *nodeLease) renew(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, l.timings.RenewDeadline)
	defer cancel()
	cur, exists := l.held, l.held != nil
	if !exists {
		got, err := l.leases.Get(ctx, l.name(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			got = &coordinationapi.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name()}}
		case err != nil:
			return err
		default:
			exists = true
		}
		cur = got
	}
	next := cur.DeepCopy()
	next.Labels = maps.Clone(next.Labels)
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[tables.NodeLeaseLabel] = l.node
	next.Annotations = maps.Clone(next.Annotations)
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[devicesAnnotation] = strings.Join(l.devices, ",")
	holder, secs := l.node, int32(l.timings.LeaseDuration/time.Second)
	renew := metav1.NewMicroTime(now)
	next.Spec.HolderIdentity, next.Spec.LeaseDurationSeconds, next.Spec.RenewTime = &holder, &secs, &renew
	var err error
	if exists {
		next, err = l.leases.Update(ctx, next, metav1.UpdateOptions{})
	} else {
		next, err = l.leases.Create(ctx, next, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	l.held = next
	return nil
}

// peers tells which nodes are live from their Leases, by when this node
// saw each Lease move: a Lease's renew time is its holder's clock, which
// need not agree with this one.
type peers struct {
	leaseDuration time.Duration
	seen          map[string]peerSeen // by node
}

type peerSeen struct {
	renew    time.Time // the Lease's renew time when last seen moving
	observed time.Time // this node's clock then
}

// live returns the live nodes with their devices, and when the first of
// them lapses if it is not renewed (zero: none live).
func (p *peers) live(leases []*coordinationapi.Lease, now time.Time) (map[string][]string, time.Time) {
	out := map[string][]string{}
	var next time.Time
	seen := map[string]peerSeen{}
	for _, l := range leases {
		node := l.Labels[tables.NodeLeaseLabel]
		s := l.Spec
		if node == "" || l.Name != nodeLeasePrefix+node || s.HolderIdentity == nil || *s.HolderIdentity != node || s.RenewTime == nil {
			continue // released, or not a node's own
		}
		ps, ok := p.seen[node]
		if !ok || !ps.renew.Equal(s.RenewTime.Time) {
			ps = peerSeen{renew: s.RenewTime.Time, observed: now}
		}
		seen[node] = ps
		lapses := ps.observed.Add(p.leaseDuration)
		if !now.Before(lapses) {
			continue
		}
		var devs []string
		if d := l.Annotations[devicesAnnotation]; d != "" {
			devs = strings.Split(d, ",")
		}
		out[node] = devs
		if next.IsZero() || lapses.Before(next) {
			next = lapses
		}
	}
	p.seen = seen
	return out, next
}

// sortedNodes are the names of m, sorted.
func sortedNodes(m map[string][]string) []string {
	return slices.Sorted(maps.Keys(m))
}
