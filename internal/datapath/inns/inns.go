// Package inns runs code inside a network namespace on a thread of its own.
package inns

import (
	"fmt"
	"runtime"

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
