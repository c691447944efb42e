package netnamespace

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Create makes a network namespace with lo up and pins it with a bind
// mount on a new file at path; remove unmounts and deletes it. The thread
// that creates it comes back to its own namespace afterwards.
func Create(path string) (remove func() error, err error) {
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return nil, fmt.Errorf("netns file: %w", err)
	}
	remove = func() error {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount netns %s: %w", path, err)
		}
		return os.Remove(path)
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
		return nil, fmt.Errorf("create netns %s: %w", path, err)
	}
	err = Do(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lo up in %s: %w", path, err), remove())
	}
	return remove, nil
}
