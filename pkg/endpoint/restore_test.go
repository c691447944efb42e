package endpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// healthLog records the last report of a cell.Health.
type healthLog struct {
	mu    sync.Mutex
	level cell.Level
	msg   string
	seen  []cell.Level
}

func (h *healthLog) set(l cell.Level, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.level, h.msg = l, msg
	h.seen = append(h.seen, l)
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

// failingDatapath fails every upsert while fail is set.
type failingDatapath struct {
	*fakeDatapath
	mu   sync.Mutex
	fail error
}

func (f *failingDatapath) UpsertEndpoint(ep spec.Endpoint) error {
	f.mu.Lock()
	err := f.fail
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.fakeDatapath.UpsertEndpoint(ep)
}

func (f *failingDatapath) heal() { f.mu.Lock(); f.fail = nil; f.mu.Unlock() }

var fastRetry = retryPolicy{Min: time.Millisecond, Max: 5 * time.Millisecond, GiveUp: time.Minute}

// restoredWith restores the endpoints of dir, persisted by an earlier
// manager, through dp.
func restoredWith(t *testing.T, dp Datapath) (*Manager, error) {
	t.Helper()
	dir := t.TempDir()
	f := newFixture(t, dir, nil)
	for i := 1; i <= 2; i++ {
		if _, _, err := f.m.Create(context.Background(), podSpec(i)); err != nil {
			t.Fatal(err)
		}
	}
	m := NewManager(quiet(), dp, NewInitIdentityAllocator(), &fakeIPAM{}, dir)
	return m, m.Restore(context.Background())
}

// TestRestoreIncompleteClears: endpoints whose datapath failed to restore
// are retried, and "restore incomplete" clears once they are whole.
func TestRestoreIncompleteClears(t *testing.T) {
	dp := &failingDatapath{fakeDatapath: newFakeDatapath(), fail: errors.New("map busy")}
	m, err := restoredWith(t, dp)
	if err == nil || m.Unrestored() != 2 {
		t.Fatalf("restore through a failing datapath: %v, %d unrestored", err, m.Unrestored())
	}
	h := &healthLog{}
	done := make(chan struct{})
	go func() { defer close(done); finishRestore(context.Background(), m, h, quiet(), fastRetry) }()
	waitUntil(t, "a retry reports degraded", func() bool { l, _ := h.last(); return l == cell.StatusDegraded })
	dp.heal()
	<-done
	if l, msg := h.last(); l != cell.StatusOK || msg != "endpoints restored" {
		t.Fatalf("after the datapath healed: %s %q", l, msg)
	}
	if m.Unrestored() != 0 || len(dp.live) != 2 || dp.live[2].HostDevice != "lxc2" {
		t.Fatalf("unrestored %d, datapath %+v", m.Unrestored(), dp.live)
	}
}

// TestRestoreGivesUpWithReason: a restore that cannot finish stops
// retrying and says why, instead of staying degraded for ever.
func TestRestoreGivesUpWithReason(t *testing.T) {
	dp := &failingDatapath{fakeDatapath: newFakeDatapath(), fail: errors.New("map busy")}
	m, _ := restoredWith(t, dp)
	h := &healthLog{}
	finishRestore(context.Background(), m, h, quiet(), retryPolicy{Min: time.Millisecond, Max: time.Millisecond, GiveUp: 20 * time.Millisecond})
	if l, msg := h.last(); l != cell.StatusStopped || !strings.Contains(msg, "gave up") || !strings.Contains(msg, "map busy") {
		t.Fatalf("after giving up: %s %q, want Stopped with the reason", l, msg)
	}
}

// TestRestoreSkipsWhatDoesNotLoad: a state file that does not parse is no
// reason to retry or to stay degraded; the report names it.
func TestRestoreSkipsWhatDoesNotLoad(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "9.json"), []byte("not json"), 0o600)
	m := NewManager(quiet(), newFakeDatapath(), NewInitIdentityAllocator(), &fakeIPAM{}, dir)
	if err := m.Restore(context.Background()); err == nil || m.Unrestored() != 0 {
		t.Fatalf("restore of a broken file: %v, %d unrestored", err, m.Unrestored())
	}
	h := &healthLog{}
	finishRestore(context.Background(), m, h, quiet(), fastRetry)
	if l, msg := h.last(); l != cell.StatusOK || !strings.Contains(msg, "9.json") {
		t.Fatalf("report %s %q, want OK naming 9.json", l, msg)
	}
}

// TestRetryRestoreForgetsDeleted: an endpoint deleted while it waited
// for its retry is not programmed again.
func TestRetryRestoreForgetsDeleted(t *testing.T) {
	dp := &failingDatapath{fakeDatapath: newFakeDatapath(), fail: errors.New("map busy")}
	m, _ := restoredWith(t, dp)
	dp.heal()
	if _, err := m.Delete(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if err := m.RetryRestore(context.Background()); err != nil || m.Unrestored() != 0 {
		t.Fatalf("retry: %v, %d unrestored", err, m.Unrestored())
	}
	if _, ok := dp.live[1]; ok || len(dp.live) != 1 {
		t.Fatalf("datapath %+v: the deleted endpoint came back", dp.live)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
