// Package netnamespace runs code inside a network namespace on a thread of its
// own, and opens netlink handles there.
package netnamespace

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Do runs fn on an OS thread switched into the network namespace at
// path; an empty path runs fn where the caller is. Ifindexes in TCX attach
// requests, netlink without a handle and /proc/sys/net all resolve in the
// calling thread's namespace, which is why this exists. fn runs on its own
// goroutine: if the thread cannot return home it exits locked, and the
// runtime discards it instead of reusing a thread in the wrong namespace.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
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
		target, err := netns.GetFromPath(path)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open netns %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter netns %s: %w", path, err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			done <- fmt.Errorf("return from netns %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// Netlink is a netlink handle in the namespace at path ("" = the
// caller's). The caller closes it.
func Netlink(path string) (*netlink.Handle, error) {
	if path == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return h, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return h, nil
}
