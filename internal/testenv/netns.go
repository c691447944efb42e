package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/inns"
)

// NewNetNS creates a network namespace for the test, with lo up, and
// returns its path: a bind mount on a file in the test's temporary
// directory, so that nothing of it shows in /run/netns. The namespace is
// removed when the test ends. It calls Privileged.
func NewNetNS(t testing.TB) string {
	t.Helper()
	Privileged(t)
	// TempDir's own cleanup, which removes the directory, was registered
	// first and so runs after the unmount below.
	path := filepath.Join(t.TempDir(), "netns")
	if err := createNetNS(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount netns %s: %v", path, err)
			return
		}
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
	})
	InNetNS(t, path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("lo: %w", err)
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return fmt.Errorf("lo up: %w", err)
		}
		return nil
	})
	return path
}

// createNetNS unshares a thread into a new network namespace, pins the
// namespace with a bind mount on a new file at path, and brings the
// thread back.
func createNetNS(path string) error {
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return fmt.Errorf("netns file: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("unshare: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		mountErr := unix.Mount(src, path, "", unix.MS_BIND, "")
		if mountErr != nil {
			mountErr = fmt.Errorf("bind mount: %w", mountErr)
		}
		// Go home rather than end the goroutine locked: a thread that ends
		// locked is discarded, except the main thread, which the runtime
		// parks forever, in the new namespace, and /proc/self/net with it.
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(mountErr, fmt.Errorf("return from the new netns: %w", err))
			return // locked: the runtime discards the thread
		}
		runtime.UnlockOSThread()
		done <- mountErr
	}()
	if err := <-done; err != nil {
		unix.Unmount(path, unix.MNT_DETACH) // if only the return failed
		os.Remove(path)
		return fmt.Errorf("create netns %s: %w", path, err)
	}
	return nil
}

// InNetNS runs fn on an OS thread in the network namespace at path (see
// inns.Do) and fails the test with fn's error. fn runs on a goroutine of
// its own, so it must not call t.Fatal: it returns its error instead.
func InNetNS(t testing.TB, path string, fn func() error) {
	t.Helper()
	if err := inns.Do(path, fn); err != nil {
		t.Fatalf("in netns %s: %v", path, err)
	}
}
