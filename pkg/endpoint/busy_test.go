package endpoint_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
)

// gatedIDs is an identity allocator that holds every Allocate until the
// test opens the gate, and tells the test of each call that waits.
type gatedIDs struct {
	countingIDs
	entered chan endpoint.Pod
	gate    chan struct{}
}

func newGatedIDs() *gatedIDs {
	return &gatedIDs{countingIDs: countingIDs{identity: 1234}, entered: make(chan endpoint.Pod, 16), gate: make(chan struct{})}
}

func (g *gatedIDs) Allocate(ctx context.Context, p endpoint.Pod) (identity.NumericIdentity, error) {
	g.entered <- p
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.countingIDs.Allocate(ctx, p)
}

// waitEntered waits for n Allocate calls to be under way at once.
func (g *gatedIDs) waitEntered(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for i := range n {
		select {
		case <-g.entered:
		case <-deadline:
			t.Fatalf("%d of %d identity allocations under way: creates are serialized", i, n)
		}
	}
}

type createResult struct {
	ep      endpoint.Endpoint
	created bool
	err     error
}

func createAsync(m *endpoint.Manager, s endpoint.Spec) chan createResult {
	ch := make(chan createResult, 1)
	go func() {
		ep, created, err := m.Create(context.Background(), s)
		ch <- createResult{ep, created, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s")
	}
	panic("unreachable")
}

// Creates of different containers do their slow work at once: each
// waits for its identity while the other's is under way, and they get
// different ids.
func TestCreatesRunConcurrently(t *testing.T) {
	ids := newGatedIDs()
	f := newFixture(t, t.TempDir(), ids)
	a, b := createAsync(f.m, podSpec(1)), createAsync(f.m, podSpec(2))
	ids.waitEntered(t, 2)
	if !f.m.HasEndpoint("c1") || !f.m.HasEndpoint("c2") {
		t.Fatal("a container being created has no endpoint for IPAM: its address could be taken back")
	}
	close(ids.gate)
	ra, rb := await(t, a), await(t, b)
	if ra.err != nil || rb.err != nil || !ra.created || !rb.created {
		t.Fatalf("creates: %+v, %+v", ra, rb)
	}
	if ra.ep.ID == rb.ep.ID {
		t.Fatalf("both endpoints got id %d", ra.ep.ID)
	}
	if f.dp.Count() != 2 || len(f.m.List()) != 2 {
		t.Fatalf("datapath holds %d, manager %d endpoints; want 2", f.dp.Count(), len(f.m.List()))
	}
}

// A create that finds its container, address or device taken by one under
// way waits for it and then answers as if they had come one after the
// other: the same spec gets the endpoint made, created=false, and a
// different one ErrConflict.
func TestCreateWaitsForTheSameContainer(t *testing.T) {
	ids := newGatedIDs()
	f := newFixture(t, t.TempDir(), ids)
	first := createAsync(f.m, podSpec(1))
	ids.waitEntered(t, 1)
	same := createAsync(f.m, podSpec(1))
	other := podSpec(1)
	other.IPv4 = netip.MustParseAddr("10.0.0.99")
	changed := createAsync(f.m, other)
	sameAddr := podSpec(2)
	sameAddr.IPv4 = podSpec(1).IPv4
	taken := createAsync(f.m, sameAddr)
	close(ids.gate)
	r := await(t, first)
	if r.err != nil || !r.created {
		t.Fatalf("first create: %+v", r)
	}
	if s := await(t, same); s.err != nil || s.created || s.ep.ID != r.ep.ID {
		t.Fatalf("same spec again: %+v, want endpoint %d with created=false", s, r.ep.ID)
	}
	if c := await(t, changed); !errors.Is(c.err, endpoint.ErrConflict) {
		t.Fatalf("other spec for the container: %v, want ErrConflict", c.err)
	}
	if c := await(t, taken); !errors.Is(c.err, endpoint.ErrConflict) {
		t.Fatalf("other container with the address: %v, want ErrConflict", c.err)
	}
	if n := len(f.m.List()); n != 1 || ids.held != 1 {
		t.Fatalf("%d endpoints, %d identities held; want 1 and 1", n, ids.held)
	}
}

// A delete of a container whose endpoint is being created waits for the
// create and then deletes the endpoint.
func TestDeleteWaitsForCreate(t *testing.T) {
	ids := newGatedIDs()
	f := newFixture(t, t.TempDir(), ids)
	created := createAsync(f.m, podSpec(1))
	ids.waitEntered(t, 1)
	deleted := make(chan error, 1)
	go func() {
		_, err := f.m.Delete(context.Background(), "c1")
		deleted <- err
	}()
	// A delete that did not wait would find no endpoint: ErrNotFound.
	close(ids.gate)
	if r := await(t, created); r.err != nil || !r.created {
		t.Fatalf("create: %+v", r)
	}
	if err := await(t, deleted); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if len(f.m.List()) != 0 || f.dp.Count() != 0 || ids.held != 0 || f.m.HasEndpoint("c1") {
		t.Fatalf("left behind: endpoints %v, datapath %d, identities %d", f.m.List(), f.dp.Count(), ids.held)
	}
}

// A failed create releases its reservation: its id, address and device
// are free for the next one.
func TestFailedCreateFreesItsReservation(t *testing.T) {
	ids := newGatedIDs()
	f := newFixture(t, t.TempDir(), ids)
	f.dp.Fail(errors.New("verifier says no"))
	first := createAsync(f.m, podSpec(1))
	ids.waitEntered(t, 1)
	second := createAsync(f.m, podSpec(1))
	close(ids.gate)
	if r := await(t, first); r.err == nil {
		t.Fatalf("create with a failing datapath: %+v", r)
	}
	// The second create, which waited for the first, fails by itself.
	if r := await(t, second); r.err == nil {
		t.Fatalf("second create with a failing datapath: %+v", r)
	}
	f.dp.Fail(nil)
	r := await(t, createAsync(f.m, podSpec(1)))
	if r.err != nil || !r.created || r.ep.ID != 1 {
		t.Fatalf("create after the failures: %+v, want id 1", r)
	}
	if ids.held != 1 {
		t.Fatalf("%d identities held, want 1", ids.held)
	}
}
