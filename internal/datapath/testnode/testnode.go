// Package testnode makes the pieces of a throwaway node for privileged
// tests and benchmarks: network namespaces held by bind mounts, an uplink
// that leads nowhere, a private bpffs, and a real cilium-agent process
// serving a node namespace. Every maker returns its undo, so that callers
// can remove what they made on any path out. It lives under
// internal/datapath because it is kernel-facing code (netlink, mounts),
// which the architecture keeps there. It needs root.
package testnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/inns"
)

// NewNetNS creates a network namespace with lo up, held by a bind mount
// on the file path (which it creates), and returns how to remove it. The
// namespace goes away once nothing else holds it: stop processes that run
// inside it before calling remove.
func NewNetNS(path string) (remove func() error, err error) {
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return nil, fmt.Errorf("netns file: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		// The thread ends in the new namespace and is never unlocked, so
		// the runtime discards it instead of reusing it elsewhere.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("unshare: %w", err)
			return
		}
		done <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
	}()
	if err := <-done; err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("create netns %s: %w", path, err)
	}
	remove = func() error {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount netns %s: %w", path, err)
		}
		return os.Remove(path)
	}
	err = inns.Do(path, func() error {
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

// AddUplink gives the node namespace ns an eth0 with the address cidr
// (e.g. "192.168.77.1/24"): the datapath wants an uplink. The veth's peer
// stays in the same namespace, so nothing leaves the node.
func AddUplink(ns, cidr string) error {
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return fmt.Errorf("uplink address: %w", err)
	}
	nl, err := inns.Netlink(ns)
	if err != nil {
		return err
	}
	defer nl.Close()
	d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0peer"}
	if err := nl.LinkAdd(d); err != nil {
		return fmt.Errorf("add uplink: %w", err)
	}
	if err := nl.AddrAdd(d, addr); err != nil {
		return fmt.Errorf("address uplink: %w", err)
	}
	if err := nl.LinkSetUp(d); err != nil {
		return fmt.Errorf("uplink up: %w", err)
	}
	return nil
}

// MountBPFFS mounts a bpffs of its own on dir/bpffs and returns the
// agent's bpf root inside it (dir/bpffs/cilium) and how to unmount it.
// Unmounting drops the pins; objects still held by a process stay until
// it exits.
func MountBPFFS(dir string) (root string, unmount func() error, err error) {
	mnt := filepath.Join(dir, "bpffs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return "", nil, fmt.Errorf("bpffs dir: %w", err)
	}
	if err := unix.Mount("bpffs", mnt, "bpf", 0, ""); err != nil {
		os.Remove(mnt)
		return "", nil, fmt.Errorf("mount bpffs on %s: %w", mnt, err)
	}
	unmount = func() error {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount bpffs %s: %w", mnt, err)
		}
		return os.Remove(mnt)
	}
	return filepath.Join(mnt, "cilium"), unmount, nil
}

// TempBPFFS mounts a bpffs of the test's own in a temporary directory,
// unmounted when the test ends, and returns the bpf root inside it,
// created.
func TempBPFFS(t testing.TB) string {
	t.Helper()
	root, unmount, err := MountBPFFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Error(err)
		}
	})
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}
