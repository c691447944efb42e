// Package allocator gives label sets their cluster-wide identity numbers
// through CiliumIdentity objects.
package allocator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/labels"
)

// ErrExhausted is returned when every cluster identity is taken.
var ErrExhausted = errors.New("no free cluster identity")

// Allocator maps label sets to cluster-wide numeric identities through
// CiliumIdentity objects (name = the number, security-labels = the labels).
//
// Agreement between agents does not need a lock or leader: each label set has
// a fixed probe sequence of candidate numbers derived from a hash of its
// labels. An agent walks the sequence; at each number it either finds an
// object with its labels (use it), finds an object with other labels (next
// number), or finds none and creates it. The API server lets exactly one create
// of a name succeed, and every agent walks the same sequence, so concurrent
// allocations of the same labels converge on one number.
//
// References are counted locally: Release drops this agent's reference and
// forgets the identity when the count reaches zero, but never deletes the
// object (other nodes may use it; the operator collects unused identities).
type Allocator struct {
	client   client.CiliumIdentityInterface
	cache    IdentityCache
	log      *slog.Logger
	min, max identity.NumericIdentity

	mu    sync.Mutex
	byKey map[string]*entry
	byID  map[identity.NumericIdentity]*entry
}

type entry struct {
	id   *identity.Identity
	refs int
}

// AllocatorConfig tunes the allocator; zero values take the defaults.
type AllocatorConfig struct {
	// Min and Max bound the numbers handed out; default 256..65535.
	Min, Max identity.NumericIdentity
	// Cache, when set, reads CiliumIdentities by name from a local copy
	// of the cluster's (the agent's table of them). A cached object with
	// the wanted labels is used without an API round trip; everything
	// else (free or foreign numbers) is still decided by the API server,
	// since a stale cache must never make two agents pick different numbers.
	Cache IdentityCache
}

// IdentityCache reads a CiliumIdentity by name; false when it has none.
type IdentityCache func(name string) (*v2.CiliumIdentity, bool)

// NewAllocator returns an allocator writing CiliumIdentity objects through c.
func NewAllocator(c client.CiliumIdentityInterface, log *slog.Logger, cfg AllocatorConfig) (*Allocator, error) {
	if cfg.Min == 0 {
		cfg.Min = identity.MinClusterIdentity
	}
	if cfg.Max == 0 {
		cfg.Max = identity.MaxClusterIdentity
	}
	if cfg.Min < identity.MinClusterIdentity || cfg.Max > identity.MaxClusterIdentity || cfg.Min > cfg.Max {
		return nil, fmt.Errorf("identity range %d..%d: outside %d..%d", cfg.Min, cfg.Max, identity.MinClusterIdentity, identity.MaxClusterIdentity)
	}
	return &Allocator{
		client: c, cache: cfg.Cache, log: log, min: cfg.Min, max: cfg.Max,
		byKey: map[string]*entry{}, byID: map[identity.NumericIdentity]*entry{},
	}, nil
}

// Allocate returns the identity of ls, creating its CiliumIdentity if no
// agent has yet, and takes a reference. Reserved label sets (reserved:host,
// reserved:init, ...) return their fixed identity without touching the API.
// isNew reports whether this call created the object.
func (a *Allocator) Allocate(ctx context.Context, ls labels.Labels) (id *identity.Identity, isNew bool, err error) {
	if err := ls.Validate(); err != nil {
		return nil, false, err
	}
	if len(ls) == 0 {
		return nil, false, errors.New("allocate identity: empty label set")
	}
	if r, ok := identity.ReservedFor(ls); ok {
		return r, false, nil
	}
	key := ls.Key()
	a.mu.Lock()
	if e, ok := a.byKey[key]; ok {
		e.refs++
		a.mu.Unlock()
		return e.id, false, nil
	}
	a.mu.Unlock()

	// The API round trips happen without the lock; two local callers for the
	// same labels both probe and reach the same number.
	num, created, err := a.claim(ctx, ls, key)
	if err != nil {
		return nil, false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.byKey[key]; ok {
		e.refs++
		return e.id, created, nil
	}
	e := &entry{id: &identity.Identity{ID: num, Labels: ls}, refs: 1}
	a.byKey[key] = e
	a.byID[num] = e
	if created {
		a.log.Info("Allocated identity", "identity", num, "labels", key)
	}
	return e.id, created, nil
}

// claim walks ls's probe sequence until it finds or creates its object.
func (a *Allocator) claim(ctx context.Context, ls labels.Labels, key string) (identity.NumericIdentity, bool, error) {
	size := uint64(a.max-a.min) + 1
	start := hashKey(key) % size
	want := ls.SecurityLabels()
	retries := 0
	for i := uint64(0); i < size; i++ {
		num := a.min + identity.NumericIdentity((start+i)%size)
		if a.cached(num, key) {
			return num, false, nil
		}
		obj := &v2.CiliumIdentity{
			ObjectMeta:     metav1.ObjectMeta{Name: num.String(), Labels: objectLabels(ls)},
			SecurityLabels: want,
		}
		_, err := a.client.Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			return num, true, nil
		}
		if !k8serrors.IsAlreadyExists(err) {
			return 0, false, fmt.Errorf("create CiliumIdentity %s: %w", num, err)
		}
		got, err := a.client.Get(ctx, num.String(), metav1.GetOptions{})
		switch {
		case k8serrors.IsNotFound(err):
			// Deleted between our create and get (garbage collected): the
			// number is free again, so try it again (a few times) before moving on.
			if retries < 3 {
				retries++
				i--
			}
			continue
		case err != nil:
			return 0, false, fmt.Errorf("get CiliumIdentity %s: %w", num, err)
		}
		if got.DeletionTimestamp == nil && labels.FromSecurityLabels(got.SecurityLabels).Key() == key {
			return num, false, nil
		}
	}
	return 0, false, ErrExhausted
}

// cached reports whether the cache holds num with labels key.
func (a *Allocator) cached(num identity.NumericIdentity, key string) bool {
	if a.cache == nil {
		return false
	}
	obj, ok := a.cache(num.String())
	return ok && obj.DeletionTimestamp == nil && labels.FromSecurityLabels(obj.SecurityLabels).Key() == key
}

// hashKey is FNV-1a of the canonical label key: stable across agents and
// releases, which the convergence argument depends on.
func hashKey(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// objectLabels are the Kubernetes labels put on the object so `kubectl get
// ciliumidentities` shows the namespace, as Cilium's printer column expects.
func objectLabels(ls labels.Labels) map[string]string {
	if l, ok := ls[labels.KeyPodNamespace]; ok && l.Source == labels.SourceK8s {
		return map[string]string{labels.KeyPodNamespace: l.Value}
	}
	return nil
}

// Release drops one reference to id taken by Allocate. It reports whether this
// was the last local reference. Reserved identities are never released.
func (a *Allocator) Release(id *identity.Identity) bool {
	if id == nil || id.ID.IsReserved() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byID[id.ID]
	if !ok {
		return false
	}
	e.refs--
	if e.refs > 0 {
		return false
	}
	delete(a.byID, id.ID)
	delete(a.byKey, e.id.Labels.Key())
	return true
}

// RefCount returns the number of local references to num.
func (a *Allocator) RefCount(num identity.NumericIdentity) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.byID[num]; ok {
		return e.refs
	}
	return 0
}

// Lookup returns the identity with number num: reserved identities directly,
// locally held ones from memory, others from their CiliumIdentity object.
func (a *Allocator) Lookup(ctx context.Context, num identity.NumericIdentity) (*identity.Identity, error) {
	if r, ok := identity.ReservedIdentity(num); ok {
		return r, nil
	}
	a.mu.Lock()
	e, ok := a.byID[num]
	a.mu.Unlock()
	if ok {
		return e.id, nil
	}
	obj, err := a.client.Get(ctx, num.String(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get CiliumIdentity %s: %w", num, err)
	}
	return FromObject(obj)
}

// FromObject reads an identity from its CiliumIdentity object.
func FromObject(obj *v2.CiliumIdentity) (*identity.Identity, error) {
	num, err := identity.ParseNumeric(obj.Name)
	if err != nil {
		return nil, err
	}
	return &identity.Identity{ID: num, Labels: labels.FromClusterIdentity(obj.SecurityLabels)}, nil
}

var _ identity.IdentityAllocator = (*Allocator)(nil)
