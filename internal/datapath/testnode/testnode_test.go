package testnode

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
)

// TestPrivilegedNodePieces makes a namespace with an uplink and a bpffs
// and checks that their undo leaves nothing mounted or on disk.
func TestPrivilegedNodePieces(t *testing.T) {
	testenv.Privileged(t) // creates a network namespace and mounts a bpffs
	dir := t.TempDir()
	ns := filepath.Join(dir, "node")
	remove, err := netnamespace.Create(ns)
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			remove()
		}
	})
	if err := AddUplink(ns, "192.168.76.1/24"); err != nil {
		t.Fatal(err)
	}
	testenv.InNetNS(t, ns, func() error {
		for _, name := range []string{"lo", "eth0", "eth0peer"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if name != "eth0peer" && l.Attrs().Flags&unix.IFF_UP == 0 {
				t.Errorf("%s is down", name)
			}
		}
		addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
		if err == nil && len(addrs) != 2 { // 127.0.0.1 and the uplink's
			t.Errorf("addresses in the node: %v", addrs)
		}
		return err
	})

	root, unmount, err := MountBPFFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(root), &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		t.Fatalf("%s is not a bpffs: %v", filepath.Dir(root), err)
	}
	if err := unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(root)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bpffs mount point left: %v", err)
	}

	removed = true
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("netns file left: %v", err)
	}
}
