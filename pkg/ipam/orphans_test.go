package ipam

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/podlink"
)

type owners map[string]bool

func (o owners) HasEndpoint(id string) bool { return o[id] }

// TestReleaseOrphans: after a restore, an address that no endpoint holds
// is freed, unless its owner asked for it again (a retried CNI ADD), got
// an endpoint meanwhile, or the address went to someone else.
func TestReleaseOrphans(t *testing.T) {
	a, _, err := New(netip.MustParsePrefix("10.0.3.0/24"), podlink.GatewayIPv4, filepath.Join(t.TempDir(), "ipam.json"))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	a.now = func() time.Time { return clock }
	for _, o := range []string{"alive", "crashed", "retried", "late-endpoint", "moved"} {
		if _, err := a.Allocate(o); err != nil {
			t.Fatal(err)
		}
	}
	eps := owners{"alive": true}
	clock = clock.Add(time.Second)
	since := clock
	orphans := a.Orphans(eps)
	if len(orphans) != 4 {
		t.Fatalf("orphans %+v, want all but alive", orphans)
	}
	clock = clock.Add(time.Second)
	if _, err := a.Allocate("retried"); err != nil {
		t.Fatal(err)
	}
	eps["late-endpoint"] = true
	var movedIP netip.Addr
	for _, o := range orphans {
		if o.Owner == "moved" {
			movedIP = o.IP
		}
	}
	if err := a.Release(movedIP); err != nil {
		t.Fatal(err)
	}
	// The pool does not hand a freed address out again at once: put the
	// newcomer on it by hand to play the reuse.
	a.mu.Lock()
	a.owner[movedIP] = "newcomer"
	a.mu.Unlock()
	freed, err := a.ReleaseOrphans(orphans, since, eps)
	if err != nil {
		t.Fatal(err)
	}
	if len(freed) != 1 || freed[0].Owner != "crashed" {
		t.Fatalf("freed %+v, want only crashed", freed)
	}
	held := map[string]bool{}
	for _, al := range a.List() {
		held[al.Owner] = true
	}
	for _, o := range []string{"alive", "retried", "late-endpoint", "newcomer"} {
		if !held[o] {
			t.Errorf("%s lost its address: %+v", o, a.List())
		}
	}
	if held["crashed"] {
		t.Errorf("crashed kept its address: %+v", a.List())
	}
}
