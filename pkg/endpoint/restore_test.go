package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	"github.com/cilium-go/cilium/pkg/identity"
)

// healthLog records the last report of a cell.Health.
type healthLog struct {
	mu    sync.Mutex
	level cell.Level
	msg   string
}

func (h *healthLog) set(l cell.Level, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.level, h.msg = l, msg
}

func (h *healthLog) OK(msg string)                  { h.set(cell.StatusOK, msg) }
func (h *healthLog) Stopped(msg string)             { h.set(cell.StatusStopped, msg) }
func (h *healthLog) Degraded(msg string, err error) { h.set(cell.StatusDegraded, msg+": "+err.Error()) }
func (h *healthLog) NewScope(string) cell.Health    { return h }
func (h *healthLog) Close()                         {}
func (h *healthLog) last() (cell.Level, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.level, h.msg
}

// awayIDs is an identity allocator whose API server is away while fail
// is set; it then gives identity 777.
type awayIDs struct {
	mu   sync.Mutex
	fail error
}

func (a *awayIDs) Allocate(context.Context, endpoint.Pod) (identity.NumericIdentity, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return 0, a.fail
	}
	return 777, nil
}

func (a *awayIDs) Release(context.Context, endpoint.Pod, identity.NumericIdentity) error { return nil }

func (a *awayIDs) heal() { a.mu.Lock(); a.fail = nil; a.mu.Unlock() }

var fastRetry = endpoint.RetryPolicy{Min: time.Millisecond, Max: 5 * time.Millisecond, GiveUp: time.Minute}

// restoredWith restores the endpoints of dir, persisted by an earlier
// manager, with identities from ids.
func restoredWith(t *testing.T, ids endpoint.IdentityAllocator) (*endpoint.Manager, *endpointtest.Datapath, error) {
	t.Helper()
	dir := t.TempDir()
	f := newFixture(t, dir, nil)
	for i := 1; i <= 2; i++ {
		if _, _, err := f.m.Create(context.Background(), podSpec(i)); err != nil {
			t.Fatal(err)
		}
	}
	dp := endpointtest.NewDatapath()
	m := endpointtest.Start(t, dp, ids, &fakeIPAM{}, dir)
	return m, dp, m.Restore(context.Background())
}

// TestRestoreIncompleteClears: endpoints whose identity failed to restore
// keep working with the identity they had, are retried, and "restore
// incomplete" clears once they have their identity again.
func TestRestoreIncompleteClears(t *testing.T) {
	ids := &awayIDs{fail: errors.New("api server away")}
	m, dp, err := restoredWith(t, ids)
	if err == nil || m.Unrestored() != 2 {
		t.Fatalf("restore without identities: %v, %d unrestored", err, m.Unrestored())
	}
	if ep, _ := dp.Live(2); dp.Count() != 2 || ep.Identity != identity.Init || ep.HostDevice != "lxc2" {
		t.Fatalf("datapath %d endpoints, 2 is %+v: want both programmed with their old identity", dp.Count(), ep)
	}
	h := &healthLog{}
	done := make(chan struct{})
	go func() { defer close(done); m.FinishRestore(context.Background(), h, fastRetry) }()
	testenv.Eventually(t, 10*time.Second, func() error {
		if l, msg := h.last(); l != cell.StatusDegraded {
			return fmt.Errorf("health %s %q, want degraded by a retry", l, msg)
		}
		return nil
	})
	ids.heal()
	<-done
	if l, msg := h.last(); l != cell.StatusOK || msg != "endpoints restored" {
		t.Fatalf("after the API server came back: %s %q", l, msg)
	}
	if ep, _ := dp.Live(2); m.Unrestored() != 0 || ep.Identity != 777 {
		t.Fatalf("unrestored %d, endpoint 2 %+v: want identity 777 programmed", m.Unrestored(), ep)
	}
}

// TestRestoreGivesUpWithReason: a restore that cannot finish stops
// retrying and says why, instead of staying degraded for ever.
func TestRestoreGivesUpWithReason(t *testing.T) {
	m, _, _ := restoredWith(t, &awayIDs{fail: errors.New("api server away")})
	h := &healthLog{}
	m.FinishRestore(context.Background(), h, endpoint.RetryPolicy{Min: time.Millisecond, Max: time.Millisecond, GiveUp: 20 * time.Millisecond})
	if l, msg := h.last(); l != cell.StatusStopped || !strings.Contains(msg, "gave up") || !strings.Contains(msg, "api server away") {
		t.Fatalf("after giving up: %s %q, want Stopped with the reason", l, msg)
	}
}

// TestRestoreReportsTheDatapath: an endpoint the datapath refuses is
// restored all the same (its pod's CNI DEL finds it), reported, and
// programmed by the reconciler once the datapath takes it.
func TestRestoreReportsTheDatapath(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, nil)
	if _, _, err := f.m.Create(context.Background(), podSpec(1)); err != nil {
		t.Fatal(err)
	}
	dp := endpointtest.NewDatapath()
	dp.Fail(errors.New("map busy"))
	m := endpointtest.Start(t, dp, endpoint.NewInitIdentityAllocator(), &fakeIPAM{}, dir)
	if err := m.Restore(context.Background()); err == nil || !strings.Contains(err.Error(), "map busy") {
		t.Fatalf("restore through a failing datapath: %v, want its error", err)
	}
	if _, err := m.Get("container-id:c1"); err != nil {
		t.Fatalf("endpoint not restored: %v", err)
	}
	dp.Fail(nil)
	testenv.Eventually(t, 10*time.Second, func() error {
		if _, ok := dp.Live(1); !ok {
			return errors.New("endpoint 1 not programmed")
		}
		return nil
	})
}

// TestRestoreSkipsWhatDoesNotLoad: a state file that does not parse is no
// reason to retry or to stay degraded; the report names it.
func TestRestoreSkipsWhatDoesNotLoad(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "9.json"), []byte("not json"), 0o600)
	m := endpointtest.Start(t, endpointtest.NewDatapath(), endpoint.NewInitIdentityAllocator(), &fakeIPAM{}, dir)
	if err := m.Restore(context.Background()); err == nil || m.Unrestored() != 0 {
		t.Fatalf("restore of a broken file: %v, %d unrestored", err, m.Unrestored())
	}
	h := &healthLog{}
	m.FinishRestore(context.Background(), h, fastRetry)
	if l, msg := h.last(); l != cell.StatusOK || !strings.Contains(msg, "9.json") {
		t.Fatalf("report %s %q, want OK naming 9.json", l, msg)
	}
}

// TestRetryRestoreForgetsDeleted: an endpoint deleted while it waited
// for its retry is not programmed again.
func TestRetryRestoreForgetsDeleted(t *testing.T) {
	ids := &awayIDs{fail: errors.New("api server away")}
	m, dp, _ := restoredWith(t, ids)
	ids.heal()
	if _, err := m.Delete(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if err := m.RetryRestore(context.Background()); err != nil || m.Unrestored() != 0 {
		t.Fatalf("retry: %v, %d unrestored", err, m.Unrestored())
	}
	if _, ok := dp.Live(1); ok || dp.Count() != 1 {
		t.Fatalf("datapath holds %d endpoints: the deleted endpoint came back", dp.Count())
	}
}
