// Package testnode makes the pieces of a throwaway node for privileged
// tests and benchmarks: network namespaces held by bind mounts, an uplink
// that leads nowhere, a private bpffs, and a real cilium-agent process
// serving a node namespace. Every maker returns its undo, so that callers
// can remove what they made on any path out. It lives under
// internal/datapath because it is kernel-facing code (netlink, mounts),
// which the architecture keeps there. It needs root.
package testnode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// AddUplink gives the node namespace ns an eth0 with the address cidr
// (e.g. "192.168.77.1/24"): the datapath wants an uplink. The veth's peer
// stays in the same namespace, so nothing leaves the node.
func AddUplink(ns, cidr string) error {
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return fmt.Errorf("uplink address: %w", err)
	}
	nl, err := netnamespace.Netlink(ns)
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
