package datapath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// Target is a kernel table the Reconciler keeps equal to desired state.
// Update and Delete must be idempotent; List reads the current contents.
type Target[K comparable, V comparable] interface {
	List() (map[K]V, error)
	Update(K, V) error
	Delete(K) error
}

// Reconciler owns the desired contents of one Target and makes the kernel
// match them: every change triggers a pass that updates what differs and
// prunes what is not desired, failed passes are retried with backoff, and
// Health reports the last outcome. Control-plane code only sets desired
// state; it never calls the Target itself.
type Reconciler[K comparable, V comparable] struct {
	name   string
	target Target[K, V]
	log    *slog.Logger
	// order, when set, sorts updates: e.g. policy denies before allows.
	order func(a, b K, va, vb V) int

	mu      sync.Mutex
	desired map[K]V
	health  error
	passes  int
	wake    chan struct{}
}

// NewReconciler starts nothing; Run does.
func NewReconciler[K comparable, V comparable](name string, target Target[K, V], log *slog.Logger) *Reconciler[K, V] {
	return &Reconciler[K, V]{
		name: name, target: target, log: log.With("reconciler", name),
		desired: map[K]V{}, wake: make(chan struct{}, 1),
		health: errors.New("not reconciled yet"),
	}
}

// WithOrder sorts updates within a pass.
func (r *Reconciler[K, V]) WithOrder(order func(a, b K, va, vb V) int) *Reconciler[K, V] {
	r.order = order
	return r
}

// Set makes k desired with value v.
func (r *Reconciler[K, V]) Set(k K, v V) {
	r.mu.Lock()
	r.desired[k] = v
	r.mu.Unlock()
	r.trigger()
}

// Remove makes k undesired.
func (r *Reconciler[K, V]) Remove(k K) {
	r.mu.Lock()
	delete(r.desired, k)
	r.mu.Unlock()
	r.trigger()
}

// Replace makes exactly all desired.
func (r *Reconciler[K, V]) Replace(all map[K]V) {
	r.mu.Lock()
	r.desired = maps.Clone(all)
	r.mu.Unlock()
	r.trigger()
}

func (r *Reconciler[K, V]) trigger() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Health is nil once the last pass succeeded, else why it did not.
func (r *Reconciler[K, V]) Health() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.health
}

// Passes counts completed passes, successful or not.
func (r *Reconciler[K, V]) Passes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passes
}

// Run reconciles on every change and retries failures, backing off from
// minRetry up to a minute, until ctx ends. A full pass also runs every
// resync interval (0: never), which repairs changes made behind its back.
func (r *Reconciler[K, V]) Run(ctx context.Context, minRetry, resync time.Duration) {
	retry := minRetry
	timer := time.NewTimer(0) // first pass right away
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		err := r.Reconcile()
		timer.Stop()
		switch {
		case err != nil:
			r.log.Warn("reconcile failed, retrying", "error", err, "in", retry)
			timer.Reset(retry)
			retry = min(2*retry, time.Minute)
		case resync > 0:
			retry = minRetry
			timer.Reset(resync)
		default:
			retry = minRetry
		}
	}
}

// Reconcile runs one pass now and returns its outcome.
func (r *Reconciler[K, V]) Reconcile() error {
	r.mu.Lock()
	desired := maps.Clone(r.desired)
	r.mu.Unlock()
	err := r.pass(desired)
	r.mu.Lock()
	r.health = err
	r.passes++
	r.mu.Unlock()
	return err
}

func (r *Reconciler[K, V]) pass(desired map[K]V) error {
	current, err := r.target.List()
	if err != nil {
		return fmt.Errorf("%s: list: %w", r.name, err)
	}
	var keys []K
	for k, v := range desired {
		if cur, ok := current[k]; !ok || cur != v {
			keys = append(keys, k)
		}
	}
	if r.order != nil {
		slices.SortFunc(keys, func(a, b K) int { return r.order(a, b, desired[a], desired[b]) })
	}
	var errs []error
	for _, k := range keys {
		if err := r.target.Update(k, desired[k]); err != nil {
			errs = append(errs, fmt.Errorf("%s: update %v: %w", r.name, k, err))
		}
	}
	for k := range current {
		if _, ok := desired[k]; ok {
			continue
		}
		if err := r.target.Delete(k); err != nil {
			errs = append(errs, fmt.Errorf("%s: delete %v: %w", r.name, k, err))
		}
	}
	return errors.Join(errs...)
}

// IPCacheTarget is the ipcache as a reconciler target.
func (m *Maps) IPCacheTarget() Target[netip.Prefix, IPCacheEntry] { return ipcacheTarget{m} }

type ipcacheTarget struct{ m *Maps }

func (t ipcacheTarget) List() (map[netip.Prefix]IPCacheEntry, error) { return t.m.IPCacheEntries() }
func (t ipcacheTarget) Update(p netip.Prefix, e IPCacheEntry) error  { return t.m.UpsertIPCache(p, e) }
func (t ipcacheTarget) Delete(p netip.Prefix) error                  { return t.m.DeleteIPCache(p) }

// PolicyTarget is the whole policy map as a reconciler target; desired
// state is the union of PolicyMapState over the node's endpoints. Use it
// with PolicyDenyFirst.
func (m *Maps) PolicyTarget() Target[PolicyKey, PolicyValue] { return policyTarget{m} }

// PolicyDenyFirst orders deny entries before allows, so that a map that
// fills up mid-pass never holds an allow without its overriding deny.
func PolicyDenyFirst(_, _ PolicyKey, a, b PolicyValue) int {
	return int(b.Flags&policyFlagDeny) - int(a.Flags&policyFlagDeny)
}

type policyTarget struct{ m *Maps }

func (t policyTarget) List() (map[PolicyKey]PolicyValue, error) {
	out := map[PolicyKey]PolicyValue{}
	var k PolicyKey
	var v PolicyValue
	it := t.m.Policy.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate policy: %w", err)
	}
	return out, nil
}

func (t policyTarget) Update(k PolicyKey, v PolicyValue) error {
	if err := t.m.Policy.Put(&k, &v); err != nil {
		return fmt.Errorf("put policy entry: %w", err)
	}
	return nil
}

func (t policyTarget) Delete(k PolicyKey) error {
	if err := t.m.Policy.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete policy entry: %w", err)
	}
	return nil
}
