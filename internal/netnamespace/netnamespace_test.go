package netnamespace_test

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
)

func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}

// TestPrivilegedDo: fn runs in the namespace, sees its links, and the
// caller's thread never leaves home.
func TestPrivilegedDo(t *testing.T) {
	ns := testenv.NewNetNS(t)
	want, err := inode(ns)
	if err != nil {
		t.Fatal(err)
	}
	// The link is made through a handle bound to the namespace, so that a
	// broken Do could not put it in the caller's.
	h, err := netnamespace.Netlink(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	const name = "innstest0"
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := inode("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	err = netnamespace.Do(ns, func() error {
		got, err := inode("/proc/thread-self/ns/net")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("fn runs in namespace %d, want %d", got, want)
		}
		if _, err := netlink.LinkByName(name); err != nil {
			return fmt.Errorf("the namespace's link: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := inode("/proc/thread-self/ns/net"); err != nil || got != home {
		t.Fatalf("the caller's thread is in %d (%v), was in %d", got, err, home)
	}
}

func TestPrivilegedDoReturnsFnsError(t *testing.T) {
	ns := testenv.NewNetNS(t)
	errFn := errors.New("from fn")
	if err := netnamespace.Do(ns, func() error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("Do: %v, want %v", err, errFn)
	}
}

func TestDoWithoutPathRunsHere(t *testing.T) {
	ran := false
	if err := netnamespace.Do("", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("ran %v, %v", ran, err)
	}
}

func TestMissingNamespace(t *testing.T) {
	missing := t.TempDir() + "/none"
	if err := netnamespace.Do(missing, func() error { t.Error("fn ran"); return nil }); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Do: %v, want %v", err, fs.ErrNotExist)
	}
	if _, err := netnamespace.Netlink(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Netlink: %v, want %v", err, fs.ErrNotExist)
	}
}
