package ipcache

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/identity"
)

// pinnedMaps opens the node's maps pinned in a bpffs of the test's own.
func pinnedMaps(t *testing.T) (pinDir string, m *datapath.Maps) {
	t.Helper()
	root := testnode.TempBPFFS(t)
	pinDir = filepath.Join(root, "maps")
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := datapath.OpenMaps(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return pinDir, m
}

// mapHolds is a condition for testenv.Eventually: nil once m holds
// exactly want. A read that fails is tried again: iterating the trie
// while the reconciler writes it may be aborted by the kernel's
// concurrent changes.
func mapHolds(m Map, want map[netip.Prefix]spec.IPCacheEntry) func() error {
	return func() error {
		got, err := m.IPCacheEntries()
		if err != nil {
			return err
		}
		return sameEntries(got, want)
	}
}

// The reconciler against the real pinned ipcache map: it prunes what a
// previous run left, and repairs entries another process (cilium-dbg, an
// operator by hand) deletes or adds behind its back.
func TestPrivilegedReconcilerPinnedMap(t *testing.T) {
	testenv.Privileged(t) // mounts a bpffs and creates BPF maps
	pinDir, agentMaps := pinnedMaps(t)
	tunnel := netip.MustParseAddr("192.168.0.3")
	a, b, stray := pfx("10.0.1.5/32"), pfx("10.0.2.7/32"), pfx("10.9.9.9/32")
	if err := agentMaps.UpsertIPCache(stray, spec.IPCacheEntry{Identity: 999}); err != nil {
		t.Fatal(err)
	}

	h := startReconciler(t, func() Map { return agentMaps })
	desired := map[netip.Prefix]spec.IPCacheEntry{a: {Identity: 300}, b: {Identity: 400, TunnelEndpoint: tunnel}}
	if _, _, err := h.replace(desired); err != nil {
		t.Fatal(err)
	}
	// The map equal to the table: the previous run's entry pruned.
	testenv.Eventually(t, 10*time.Second, mapHolds(agentMaps, desired))

	// Another process opens the pins and meddles.
	other, err := datapath.OpenMaps(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.DeleteIPCache(b); err != nil {
		t.Fatal(err)
	}
	if err := other.UpsertIPCache(stray, spec.IPCacheEntry{Identity: 999}); err != nil {
		t.Fatal(err)
	}
	if err := other.UpsertIPCache(a, spec.IPCacheEntry{Identity: 301}); err != nil {
		t.Fatal(err)
	}
	h.rec.Prune() // what the prune interval does every minute
	// b back, a repaired, the stray pruned.
	testenv.Eventually(t, 10*time.Second, mapHolds(other, desired))

	// A change of desired state is incremental and reaches the pins.
	desired[a] = spec.IPCacheEntry{Identity: 302}
	delete(desired, b)
	if _, _, err := h.replace(desired); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, mapHolds(other, desired))
}

// A full ipcache map: the entries that do not fit are retried, the
// module health says why, the ones that fit are in, and everything goes
// in once there is room.
func TestPrivilegedReconcilerFullMap(t *testing.T) {
	testenv.Privileged(t) // mounts a bpffs and creates BPF maps
	_, m := pinnedMaps(t)
	h := startReconciler(t, func() Map { return m })
	size := int(m.IPCache.MaxEntries())
	desired := map[netip.Prefix]spec.IPCacheEntry{}
	for i := range size + 10 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		desired[p] = spec.IPCacheEntry{Identity: identity.NumericIdentity(256 + i%1000)}
	}
	if _, _, err := h.replace(desired); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		return h.healthIs(cell.StatusDegraded, datapath.ErrMapFull.Error())
	})
	got, err := m.IPCacheEntries()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size {
		t.Fatalf("%d entries in a map of %d", len(got), size)
	}
	for p, e := range got {
		if desired[p] != e {
			t.Fatalf("entry %s = %+v, want %+v", p, e, desired[p])
		}
	}

	// Room again: the retries put the rest in and health recovers.
	n := 0
	for p := range desired {
		if n == 20 {
			break
		}
		delete(desired, p)
		n++
	}
	if _, _, err := h.replace(desired); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		return errors.Join(h.healthIs(cell.StatusOK, ""), mapHolds(m, desired)())
	})
}
