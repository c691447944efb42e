package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var gw = netip.MustParseAddr("169.254.1.1")

func newPool(t *testing.T, cidr string) (*Allocator, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ipam.json")
	a, dropped, err := New(netip.MustParsePrefix(cidr), gw, file)
	if err != nil || len(dropped) != 0 {
		t.Fatalf("New: %v, dropped %v", err, dropped)
	}
	return a, file
}

func TestAllocateNeverTwiceUntilExhausted(t *testing.T) {
	a, _ := newPool(t, "10.1.0.0/29") // 6 usable
	seen := map[netip.Addr]bool{}
	for i := range 6 {
		r, err := a.Allocate(fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if seen[r.IP] || r.IP == netip.MustParseAddr("10.1.0.0") || r.IP == netip.MustParseAddr("10.1.0.7") {
			t.Fatalf("allocation %d: %s repeated or not usable", i, r.IP)
		}
		if r.Gateway != gw || r.PodCIDR.String() != "10.1.0.0/29" {
			t.Fatalf("allocation %d: %+v", i, r)
		}
		seen[r.IP] = true
	}
	if _, err := a.Allocate("c-last"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("7th allocation: %v, want ErrExhausted", err)
	}
}

func TestAllocateConcurrentDistinct(t *testing.T) {
	a, _ := newPool(t, "10.1.0.0/24")
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := map[netip.Addr]string{}
	for i := range 50 {
		wg.Go(func() {
			owner := fmt.Sprintf("c%d", i)
			r, err := a.Allocate(owner)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if o, dup := got[r.IP]; dup {
				t.Errorf("%s given to %s and %s", r.IP, o, owner)
			}
			got[r.IP] = owner
		})
	}
	wg.Wait()
}

func TestSameOwnerSameAddress(t *testing.T) {
	a, _ := newPool(t, "10.1.0.0/24")
	r1, err1 := a.Allocate("c1")
	r2, err2 := a.Allocate("c1")
	if err1 != nil || err2 != nil || r1.IP != r2.IP {
		t.Fatalf("retried allocation: %v %v, %s vs %s", err1, err2, r1.IP, r2.IP)
	}
	if n := len(a.List()); n != 1 {
		t.Fatalf("%d allocations, want 1", n)
	}
}

func TestReleaseAndReuse(t *testing.T) {
	a, _ := newPool(t, "10.1.0.0/30") // 2 usable
	r1, _ := a.Allocate("c1")
	if _, err := a.Allocate("c2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(r1.IP); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(r1.IP); !errors.Is(err, ErrNotAllocated) {
		t.Fatalf("second release: %v, want ErrNotAllocated", err)
	}
	r3, err := a.Allocate("c3")
	if err != nil || r3.IP != r1.IP {
		t.Fatalf("after release got %s (%v), want %s", r3.IP, err, r1.IP)
	}
	if err := a.ReleaseOwner("c3"); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseOwner("nobody"); err != nil {
		t.Fatalf("releasing an owner without address: %v", err)
	}
}

func TestRestartKeepsAllocations(t *testing.T) {
	a, file := newPool(t, "10.1.0.0/24")
	r1, _ := a.Allocate("c1")
	r2, _ := a.Allocate("c2")
	a.Release(r1.IP)

	b, dropped, err := New(netip.MustParsePrefix("10.1.0.0/24"), gw, file)
	if err != nil || len(dropped) != 0 {
		t.Fatalf("reopen: %v %v", err, dropped)
	}
	if l := b.List(); len(l) != 1 || l[0].IP != r2.IP || l[0].Owner != "c2" {
		t.Fatalf("after restart: %+v", l)
	}
	if r, _ := b.Allocate("c2"); r.IP != r2.IP {
		t.Fatalf("c2 got %s after restart, had %s", r.IP, r2.IP)
	}
	// The address c1 released is not handed out again right after the
	// restart either.
	if r, err := b.Allocate("c3"); err != nil || r.IP == r1.IP {
		t.Fatalf("c3 got %s (%v) after restart: the address c1 just released", r.IP, err)
	}
	for i := range 300 {
		r, err := b.Allocate(fmt.Sprintf("n%d", i))
		if err != nil || r.IP == r2.IP {
			t.Fatalf("new allocation %s (%v) collides with %s", r.IP, err, r2.IP)
		}
		b.ReleaseOwner(fmt.Sprintf("n%d", i))
	}
}

func TestCIDRChangeDropsOutsiders(t *testing.T) {
	a, file := newPool(t, "10.1.0.0/24")
	r, _ := a.Allocate("c1")
	b, dropped, err := New(netip.MustParsePrefix("10.2.0.0/24"), gw, file)
	if err != nil || len(dropped) != 1 || dropped[0].IP != r.IP {
		t.Fatalf("dropped %v (%v), want %s", dropped, err, r.IP)
	}
	if len(b.List()) != 0 {
		t.Fatalf("allocations left: %v", b.List())
	}
}

func TestCorruptStateFileFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ipam.json")
	os.WriteFile(file, []byte("{"), 0o600)
	if _, _, err := New(netip.MustParsePrefix("10.1.0.0/24"), gw, file); err == nil {
		t.Fatal("corrupt state accepted")
	}
}

func TestConfigNamesFlag(t *testing.T) {
	for _, tc := range []struct{ cidr, want string }{
		{"10.0.0.0", `--ipam-pod-cidr "10.0.0.0"`},
		{"fd00::/64", "IPv4 prefix required"},
		{"10.0.0.0/31", "too small"},
	} {
		_, err := Config{IPAMPodCIDR: tc.cidr}.PodCIDR()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--ipam-pod-cidr") {
			t.Errorf("%q: %v, want %q", tc.cidr, err, tc.want)
		}
	}
	if p, err := (Config{IPAMPodCIDR: "10.0.1.0/24"}).PodCIDR(); err != nil || p.String() != "10.0.1.0/24" {
		t.Errorf("valid CIDR: %v %v", p, err)
	}
	if p, err := (Config{}).PodCIDR(); err != nil || p.IsValid() {
		t.Errorf("unset: %v %v, want no CIDR and no error", p, err)
	}
}

func TestPendingPoolAllocatesOnlyOnceOpen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ipam.json")
	a := NewPending(gw, file)
	if _, err := a.Allocate("c1"); !errors.Is(err, ErrNoPodCIDR) {
		t.Fatalf("pending Allocate: %v, want ErrNoPodCIDR", err)
	}
	if a.Capacity() != 0 || a.PodCIDR().IsValid() {
		t.Fatalf("pending pool: capacity %d, CIDR %v", a.Capacity(), a.PodCIDR())
	}
	if _, err := a.Open(netip.MustParsePrefix("10.3.0.0/24")); err != nil {
		t.Fatal(err)
	}
	r, err := a.Allocate("c1")
	if err != nil || r.IP != netip.MustParseAddr("10.3.0.1") || a.Capacity() != 254 {
		t.Fatalf("open pool: %v %v, capacity %d", r, err, a.Capacity())
	}
	if _, err := a.Open(netip.MustParsePrefix("10.4.0.0/24")); err == nil {
		t.Fatal("second Open accepted")
	}
}
