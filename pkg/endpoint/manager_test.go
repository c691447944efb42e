package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/identity"
)

type fakeIPAM struct{ released []string }

func (f *fakeIPAM) ReleaseOwner(o string) error { f.released = append(f.released, o); return nil }

// countingIDs hands out identities and counts releases.
type countingIDs struct {
	mu       sync.Mutex
	held     int
	identity identity.NumericIdentity
}

func (c *countingIDs) Allocate(context.Context, endpoint.Pod) (identity.NumericIdentity, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held++
	return c.identity, nil
}

func (c *countingIDs) Release(context.Context, endpoint.Pod, identity.NumericIdentity) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	return nil
}

func podSpec(n int) endpoint.Spec {
	return endpoint.Spec{
		ContainerID: fmt.Sprintf("c%d", n), PodName: fmt.Sprintf("pod%d", n), PodNamespace: "default",
		IPv4: netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}), MAC: fmt.Sprintf("02:00:00:00:00:%02x", n),
		IfName: "eth0", HostIfName: fmt.Sprintf("lxc%d", n), HostIfindex: 100 + n, NetNSPath: "/run/netns/x",
	}
}

type fixture struct {
	m    *endpoint.Manager
	dp   *endpointtest.Datapath
	ipam *fakeIPAM
	ids  endpoint.IdentityAllocator
	dir  string
}

func newFixture(t *testing.T, dir string, ids endpoint.IdentityAllocator) *fixture {
	if ids == nil {
		ids = endpoint.NewInitIdentityAllocator()
	}
	f := &fixture{dp: endpointtest.NewDatapath(), ipam: &fakeIPAM{}, ids: ids, dir: dir}
	f.m = endpointtest.Start(t, f.dp, ids, f.ipam, dir)
	return f
}

func TestCreateProgramsWithInitIdentityAndPersists(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	ep, created, err := f.m.Create(context.Background(), podSpec(1))
	if err != nil || !created {
		t.Fatalf("Create: %v created=%v", err, created)
	}
	if ep.ID != 1 || ep.Identity != identity.Init {
		t.Fatalf("endpoint %+v: want id 1 with identity %d", ep, identity.Init)
	}
	live, _ := f.dp.Live(1)
	if live.IPv4 != podSpec(1).IPv4 || live.HostDevice != "lxc1" || live.Identity != identity.Init || live.MAC.String() != podSpec(1).MAC {
		t.Fatalf("datapath got %+v", live)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "1.json")); err != nil {
		t.Fatalf("state file: %v", err)
	}
	got, err := f.m.Get("container-id:c1")
	if err != nil || got.ID != 1 {
		t.Fatalf("Get by container: %+v %v", got, err)
	}
	if got, err := f.m.Get("1"); err != nil || got.ContainerID != "c1" {
		t.Fatalf("Get by id: %+v %v", got, err)
	}
}

func TestCreateIdempotentAndConflicts(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, _, err := f.m.Create(ctx, podSpec(1)); err != nil {
		t.Fatal(err)
	}
	again, created, err := f.m.Create(ctx, podSpec(1))
	if err != nil || created || again.ID != 1 {
		t.Fatalf("same spec again: %+v created=%v %v", again, created, err)
	}
	for name, tweak := range map[string]func(*endpoint.Spec){
		"same container, other address": func(s *endpoint.Spec) { s.IPv4 = netip.MustParseAddr("10.0.0.99") },
		"other container, same address": func(s *endpoint.Spec) { s.ContainerID = "other"; s.HostIfName = "lxcother" },
		"other container, same device":  func(s *endpoint.Spec) { s.ContainerID = "other"; s.IPv4 = netip.MustParseAddr("10.0.0.98") },
	} {
		s := podSpec(1)
		tweak(&s)
		if _, _, err := f.m.Create(ctx, s); !errors.Is(err, endpoint.ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", name, err)
		}
	}
	if n := len(f.m.List()); n != 1 {
		t.Fatalf("%d endpoints, want 1", n)
	}
}

func TestCreateRejectsBadSpec(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	for field, tweak := range map[string]func(*endpoint.Spec){
		"containerID": func(s *endpoint.Spec) { s.ContainerID = "" },
		"ipv4":        func(s *endpoint.Spec) { s.IPv4 = netip.Addr{} },
		"hostIfName":  func(s *endpoint.Spec) { s.HostIfName = "a-name-far-too-long" },
		"hostIfindex": func(s *endpoint.Spec) { s.HostIfindex = 0 },
		"mac":         func(s *endpoint.Spec) { s.MAC = "zz" },
		"netnsPath":   func(s *endpoint.Spec) { s.NetNSPath = "" },
	} {
		s := podSpec(1)
		tweak(&s)
		_, _, err := f.m.Create(context.Background(), s)
		if err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("bad %s: %v", field, err)
		}
	}
	if f.dp.Upserts() != 0 {
		t.Fatal("datapath touched by invalid specs")
	}
}

func TestCreateRollsBackWhenDatapathFails(t *testing.T) {
	ids := &countingIDs{identity: 1234}
	f := newFixture(t, t.TempDir(), ids)
	f.dp.Fail(errors.New("verifier says no"))
	if _, _, err := f.m.Create(context.Background(), podSpec(1)); err == nil || !strings.Contains(err.Error(), "verifier says no") {
		t.Fatalf("Create with a failing datapath: %v, want the datapath's error", err)
	}
	f.dp.Fail(nil)
	if len(f.m.List()) != 0 || ids.held != 0 || f.dp.Count() != 0 {
		t.Fatalf("left behind: endpoints %v, identities %d, datapath %d", f.m.List(), ids.held, f.dp.Count())
	}
	if entries, _ := os.ReadDir(f.dir); len(entries) != 0 {
		t.Fatalf("state files left: %v", entries)
	}
	// The id is free again.
	ep, _, err := f.m.Create(context.Background(), podSpec(1))
	if err != nil || ep.ID != 1 || ep.Identity != 1234 {
		t.Fatalf("retry: %+v %v", ep, err)
	}
}

func TestDeleteRemovesEverything(t *testing.T) {
	ids := &countingIDs{identity: 300}
	f := newFixture(t, t.TempDir(), ids)
	ctx := context.Background()
	f.m.Create(ctx, podSpec(1))
	f.m.Create(ctx, podSpec(2))
	ep, err := f.m.Delete(ctx, "c1")
	if err != nil || ep.ID != 1 {
		t.Fatalf("Delete: %+v %v", ep, err)
	}
	if _, ok := f.dp.Live(1); ok {
		t.Fatal("datapath still has endpoint 1")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state file of 1: %v", err)
	}
	if ids.held != 1 || !slices.Equal(f.ipam.released, []string{"c1"}) {
		t.Fatalf("identities held %d, released addresses %v", ids.held, f.ipam.released)
	}
	if _, err := f.m.Delete(ctx, "c1"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	// An unknown container's address is freed all the same.
	if !slices.Equal(f.ipam.released, []string{"c1", "c1"}) {
		t.Fatalf("released %v", f.ipam.released)
	}
	if l := f.m.List(); len(l) != 1 || l[0].ID != 2 {
		t.Fatalf("left: %+v", l)
	}
}

// A deleted endpoint's id stays taken until its programs are gone: the
// delete reports the datapath's failure, a new endpoint gets another id,
// and once the reconciler's retry unprogrammed it, the id is free again.
func TestDeleteHoldsTheIDUntilUnprogrammed(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, _, err := f.m.Create(ctx, podSpec(1)); err != nil {
		t.Fatal(err)
	}
	f.dp.FailDeletes(errors.New("device busy"))
	if _, err := f.m.Delete(ctx, "c1"); err == nil || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("Delete with a failing datapath: %v, want its error", err)
	}
	if _, ok := f.dp.Live(1); !ok {
		t.Fatal("endpoint 1 unprogrammed although every delete failed")
	}
	ep, _, err := f.m.Create(ctx, podSpec(2))
	if err != nil || ep.ID != 2 {
		t.Fatalf("Create beside the undeleted endpoint 1: %+v %v, want id 2", ep, err)
	}
	f.dp.FailDeletes(nil)
	testenv.Eventually(t, 10*time.Second, func() error {
		if _, ok := f.dp.Live(1); ok {
			return errors.New("endpoint 1 still programmed")
		}
		return nil
	})
	testenv.Eventually(t, 10*time.Second, func() error {
		ep, _, err := f.m.Create(ctx, podSpec(3))
		if err != nil {
			return err
		}
		if ep.ID != 1 {
			_, err := f.m.Delete(ctx, "c3")
			return errors.Join(fmt.Errorf("got id %d, want the freed 1", ep.ID), err)
		}
		return nil
	})
}

func TestRestoreAfterRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, nil)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if _, _, err := f.m.Create(ctx, podSpec(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.m.Delete(ctx, "c2")
	// A stray file that is not an endpoint must not stop the restore.
	os.WriteFile(filepath.Join(dir, "77.json"), []byte("not json"), 0o600)

	g := newFixture(t, dir, nil)
	err := g.m.Restore(ctx)
	if err == nil {
		t.Fatal("Restore did not report the broken file")
	}
	got := g.m.List()
	if len(got) != 2 || got[0].ContainerID != "c1" || got[1].ContainerID != "c3" {
		t.Fatalf("restored %+v", got)
	}
	if ep3, _ := g.dp.Live(3); g.dp.Count() != 2 || ep3.HostDevice != "lxc3" {
		t.Fatalf("datapath after restore: %d endpoints, 3 is %+v", g.dp.Count(), ep3)
	}
	// Pruning after a partial read would drop live pods: the table stays
	// uninitialized, and the reconciler never prunes.
	if p := g.dp.Pruned(); len(p) != 0 {
		t.Fatalf("pruned despite a read error: %v", p)
	}
	os.Remove(filepath.Join(dir, "77.json"))
	h := newFixture(t, dir, nil)
	if err := h.m.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if p := h.dp.Pruned(); len(p) == 0 || !slices.Equal(p[0], []uint16{1, 3}) {
			return fmt.Errorf("prunes kept %v, want [1 3] first", p)
		}
		return nil
	})
	// New endpoints take free ids, never a restored one.
	ep, _, err := h.m.Create(ctx, podSpec(4))
	if err != nil || ep.ID != 2 {
		t.Fatalf("new endpoint after restore: %+v %v", ep, err)
	}
}

func TestRefreshIdentityReprogramsOnChange(t *testing.T) {
	ids := &countingIDs{identity: 300}
	f := newFixture(t, t.TempDir(), ids)
	ctx := context.Background()
	if _, _, err := f.m.Create(ctx, podSpec(1)); err != nil {
		t.Fatal(err)
	}
	upserts := f.dp.Upserts()
	if ep, err := f.m.RefreshIdentity(ctx, "c1"); err != nil || ep.Identity != 300 || f.dp.Upserts() != upserts {
		t.Fatalf("unchanged labels: %+v %v, %d upserts: want no reprogramming", ep, err, f.dp.Upserts()-upserts)
	}
	ids.identity = 400 // the pod's labels changed
	ep, err := f.m.RefreshIdentity(ctx, "c1")
	if live, _ := f.dp.Live(1); err != nil || ep.Identity != 400 || live.Identity != 400 {
		t.Fatalf("after relabel: %+v %v, datapath %+v", ep, err, live)
	}
	if got, _ := f.m.Get("1"); got.Identity != 400 {
		t.Fatalf("manager holds identity %d", got.Identity)
	}
	// The new identity is persisted: a restarted agent restores it.
	g := newFixture(t, f.dir, ids)
	if err := g.m.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.m.Get("1"); got.Identity != 400 {
		t.Fatalf("restored identity %d, want 400", got.Identity)
	}
	if _, err := f.m.RefreshIdentity(ctx, "nope"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Fatalf("unknown container: %v", err)
	}
}
