package allocator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/cilium/statedb"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
)

func newAllocator(t *testing.T, c client.Interface, cfg AllocatorConfig) *Allocator {
	t.Helper()
	a, err := NewAllocator(c.CiliumV2().CiliumIdentities(), slog.New(slog.DiscardHandler), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func podLabels(app string) labels.Labels {
	return labels.FromStrings("k8s:app="+app, "k8s:io.kubernetes.pod.namespace=default")
}

func TestReservedNumbers(t *testing.T) {
	want := map[string]identity.NumericIdentity{"host": 1, "world": 2, "unmanaged": 3, "health": 4, "init": 5,
		"remote-node": 6, "kube-apiserver": 7, "ingress": 8, "world-ipv4": 9, "world-ipv6": 10}
	for name, num := range want {
		got, ok := identity.LookupReservedName(name)
		if !ok || got != num {
			t.Errorf("%s = %d, want %d", name, got, num)
		}
	}
	a := newAllocator(t, client.NewFake(), AllocatorConfig{})
	id, isNew, err := a.Allocate(t.Context(), labels.Reserved("host"))
	if err != nil || id.ID != identity.Host || isNew {
		t.Fatalf("reserved:host = %v, %v, %v", id, isNew, err)
	}
	id, _, err = a.Allocate(t.Context(), labels.FromStrings("reserved:init", "k8s:app=x"))
	if err != nil || id.ID != identity.Init {
		t.Fatalf("init labels = %v, %v", id, err)
	}
	got, err := a.Lookup(t.Context(), identity.World)
	if err != nil || !got.Labels.Has(labels.New(labels.SourceReserved, "world", "")) {
		t.Fatalf("lookup world = %v, %v", got, err)
	}
}

func TestAllocateCreatesObject(t *testing.T) {
	fake := client.NewFake()
	a := newAllocator(t, fake, AllocatorConfig{})
	id, isNew, err := a.Allocate(t.Context(), podLabels("web"))
	if err != nil || !isNew {
		t.Fatalf("allocate: %v (new %v)", err, isNew)
	}
	if !id.ID.IsCluster() {
		t.Fatalf("identity %d outside the cluster range", id.ID)
	}
	obj, err := fake.CiliumV2().CiliumIdentities().Get(t.Context(), id.ID.String(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k8s:app": "web", "k8s:io.kubernetes.pod.namespace": "default"}
	if fmt.Sprint(obj.SecurityLabels) != fmt.Sprint(want) {
		t.Errorf("security-labels = %v, want %v", obj.SecurityLabels, want)
	}
	if obj.Labels[labels.KeyPodNamespace] != "default" {
		t.Errorf("object labels = %v", obj.Labels)
	}
	// A second agent finds the same object.
	b := newAllocator(t, fake, AllocatorConfig{})
	id2, isNew, err := b.Allocate(t.Context(), podLabels("web"))
	if err != nil || isNew || id2.ID != id.ID {
		t.Fatalf("second agent got %v new=%v err=%v, want %d", id2, isNew, err, id.ID)
	}
	got, err := b.Lookup(t.Context(), id.ID)
	if err != nil || !got.Labels.Equal(podLabels("web")) {
		t.Fatalf("lookup = %v, %v", got, err)
	}
}

// TestAllocateRace runs two agents with many goroutines each, allocating the
// same label sets in a range small enough that label sets collide on their
// first candidate. Every label set must end with one number everywhere and one
// object per label set.
func TestAllocateRace(t *testing.T) {
	fake := client.NewFake()
	cfg := AllocatorConfig{Min: 256, Max: 256 + 31}
	agents := []*Allocator{newAllocator(t, fake, cfg), newAllocator(t, fake, cfg)}
	const sets, workers = 20, 8
	type result struct {
		set int
		id  identity.NumericIdentity
	}
	results := make(chan result, len(agents)*workers*sets)
	var wg sync.WaitGroup
	for _, a := range agents {
		for w := range workers {
			wg.Go(func() {
				for i := range sets {
					set := (i + w) % sets // each worker starts elsewhere
					id, _, err := a.Allocate(context.Background(), podLabels(fmt.Sprint("app", set)))
					if err != nil {
						t.Errorf("allocate set %d: %v", set, err)
						return
					}
					results <- result{set, id.ID}
				}
			})
		}
	}
	wg.Wait()
	close(results)
	bySet := map[int]identity.NumericIdentity{}
	for r := range results {
		if prev, ok := bySet[r.set]; ok && prev != r.id {
			t.Fatalf("label set %d got identities %d and %d", r.set, prev, r.id)
		}
		bySet[r.set] = r.id
	}
	list, err := fake.CiliumV2().CiliumIdentities().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != sets {
		t.Fatalf("%d CiliumIdentity objects, want %d", len(list.Items), sets)
	}
	seen := map[identity.NumericIdentity]bool{}
	for set, id := range bySet {
		if seen[id] {
			t.Fatalf("identity %d given to two label sets", id)
		}
		seen[id] = true
		if got := agents[0].RefCount(id); got != workers {
			t.Errorf("agent 0 holds %d references to set %d, want %d", got, set, workers)
		}
	}
}

func TestReleaseAndReuse(t *testing.T) {
	fake := client.NewFake()
	a := newAllocator(t, fake, AllocatorConfig{})
	first, _, err := a.Allocate(t.Context(), podLabels("web"))
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := a.Allocate(t.Context(), podLabels("web"))
	if err != nil || again.ID != first.ID || a.RefCount(first.ID) != 2 {
		t.Fatalf("second allocate: %v %v refs=%d", again, err, a.RefCount(first.ID))
	}
	if a.Release(first) {
		t.Fatal("first release reported last reference")
	}
	if !a.Release(first) || a.RefCount(first.ID) != 0 {
		t.Fatal("second release did not drop the last reference")
	}
	// The object stays (other nodes may use it); allocating again reuses it.
	reused, isNew, err := a.Allocate(t.Context(), podLabels("web"))
	if err != nil || isNew || reused.ID != first.ID {
		t.Fatalf("reallocate: %v new=%v err=%v, want %d", reused, isNew, err, first.ID)
	}
	other, _, err := a.Allocate(t.Context(), podLabels("db"))
	if err != nil || other.ID == first.ID {
		t.Fatalf("different labels: %v, %v", other, err)
	}
	if a.Release(&identity.Identity{ID: identity.Host}) {
		t.Fatal("released a reserved identity")
	}
}

func TestAllocateSkipsTakenNumbers(t *testing.T) {
	// Every number but one is held by other labels: the allocator must walk
	// past them to the free one.
	cfg := AllocatorConfig{Min: 300, Max: 309}
	var objs []runtime.Object
	for n := cfg.Min; n < cfg.Max; n++ {
		objs = append(objs, &v2.CiliumIdentity{ObjectMeta: metav1.ObjectMeta{Name: n.String()},
			SecurityLabels: map[string]string{"k8s:app": "other" + n.String()}})
	}
	fake := client.NewFake(objs...)
	a := newAllocator(t, fake, cfg)
	id, isNew, err := a.Allocate(t.Context(), podLabels("web"))
	if err != nil || !isNew || id.ID != cfg.Max {
		t.Fatalf("got %v new=%v err=%v, want %d", id, isNew, err, cfg.Max)
	}
	if _, _, err := a.Allocate(t.Context(), podLabels("db")); !errors.Is(err, ErrExhausted) {
		t.Fatalf("full range: err = %v, want ErrExhausted", err)
	}
}

func TestAllocateAPIError(t *testing.T) {
	fake := client.NewFake()
	fake.PrependReactor("create", "ciliumidentities", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, k8serrors.NewForbidden(v2.Resource("ciliumidentities"), "", errors.New("no"))
	})
	a := newAllocator(t, fake, AllocatorConfig{})
	if _, _, err := a.Allocate(t.Context(), podLabels("web")); !k8serrors.IsForbidden(err) {
		t.Fatalf("err = %v, want forbidden", err)
	}
	if _, _, err := a.Allocate(t.Context(), labels.Labels{}); err == nil {
		t.Fatal("empty label set accepted")
	}
	if _, err := NewAllocator(nil, nil, AllocatorConfig{Min: 10, Max: 20}); err == nil {
		t.Fatal("range below 256 accepted")
	}
}

func TestAllocateUsesCache(t *testing.T) {
	fake := client.NewFake()
	a := newAllocator(t, fake, AllocatorConfig{})
	first, _, err := a.Allocate(t.Context(), podLabels("web"))
	if err != nil {
		t.Fatal(err)
	}
	db := statedb.New()
	tbls, err := tables.Start(t.Context(), db, &tables.Clients{Cilium: fake})
	if err != nil {
		t.Fatal(err)
	}
	b := newAllocator(t, fake, AllocatorConfig{Cache: func(name string) (*v2.CiliumIdentity, bool) {
		return tables.Get(db.ReadTxn(), tbls.CiliumIdentities, name)
	}})
	// With the object in the cache, the second agent needs no API call.
	fake.PrependReactor("*", "ciliumidentities", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() == "create" || action.GetVerb() == "get" {
			t.Errorf("unexpected API %s", action.GetVerb())
		}
		return false, nil, nil
	})
	got, isNew, err := b.Allocate(t.Context(), podLabels("web"))
	if err != nil || isNew || got.ID != first.ID {
		t.Fatalf("cached allocate: %v new=%v err=%v, want %d", got, isNew, err, first.ID)
	}
}
