package main

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
)

// The agent collects expired conntrack entries on its own, every
// --conntrack-gc-interval, and leaves live ones.
func TestPrivilegedAgentCollectsConntrack(t *testing.T) {
	testenv.Privileged(t) // creates a network namespace and BPF maps
	dir := t.TempDir()
	nodeNS := testenv.NewNetNS(t)
	addUplink(t, nodeNS, "192.168.78.1/24")
	bpf := testnode.TempBPFFS(t)
	args := []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + filepath.Join(dir, "run", "cilium.sock"),
		"--bpf-root=" + bpf, "--prometheus-serve-addr=", "--ipam-pod-cidr=10.201.0.0/24", "--node-ipv4=192.168.78.1",
		"--uplink=eth0", "--routing-mode=native", "--node-netns=" + nodeNS, "--conntrack-gc-interval=100ms"}
	h := startRealAgent(t, args)
	t.Cleanup(func() { stopAgent(t, h) })

	maps, err := datapath.OpenMaps(filepath.Join(bpf, "maps"))
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	now, err := datapath.Monotonic()
	if err != nil {
		t.Fatal(err)
	}
	key := func(port uint16) datapath.CTKey {
		a, b := netip.MustParseAddr("10.201.0.5").As4(), netip.MustParseAddr("10.9.9.9").As4()
		return datapath.CTKey{Saddr: be32(a), Daddr: be32(b), Sport: port, Dport: 53, Protocol: 17}
	}
	expired, live := key(1), key(2)
	if err := maps.CT4.Put(expired, datapath.CTEntry{Expires: uint64(now - time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := maps.CT4.Put(live, datapath.CTEntry{Expires: uint64(now + time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var v datapath.CTEntry
	testenv.Eventually(t, 10*time.Second, func() error {
		if maps.CT4.Lookup(expired, &v) == nil {
			return errors.New("the expired conntrack entry is still there")
		}
		return nil
	})
	if err := maps.CT4.Lookup(live, &v); err != nil {
		t.Fatalf("the live entry went too: %v", err)
	}
}

// be32 is a's bytes as the kernel stores them, read as a little-endian
// uint32 (the key fields are in network order).
func be32(a [4]byte) uint32 {
	return uint32(a[0]) | uint32(a[1])<<8 | uint32(a[2])<<16 | uint32(a[3])<<24
}
