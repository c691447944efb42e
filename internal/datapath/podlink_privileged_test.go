package datapath_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/podlink"
)

// handleIn is a netlink handle in the namespace at nsPath, closed when
// the test ends.
func handleIn(t *testing.T, nsPath string) *netlink.Handle {
	t.Helper()
	h, err := netnamespace.Netlink(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// hostLink looks a pod's host-side device up in its node.
func hostLink(t *testing.T, p *dptest.Pod) netlink.Link {
	t.Helper()
	h := handleIn(t, p.Node.NS)
	l, err := h.LinkByName(p.HostDevice)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The pair CreatePodLink makes passes CheckPodLink as the kind it was
// made, fails it as the other kind and once deleted; deleting twice is
// no error.
func TestPrivilegedPodLink(t *testing.T) {
	for _, tc := range []struct {
		device, other podlink.Device
		kind          string
	}{
		{podlink.DeviceVeth, podlink.DeviceNetkit, "veth"},
		{podlink.DeviceNetkit, podlink.DeviceVeth, "netkit"},
	} {
		t.Run(string(tc.device), func(t *testing.T) {
			c := newCluster(t, dptest.Options{Plain: true, Nodes: 1, PodsPerNode: 1, PodDevice: tc.device})
			p := c.Nodes[0].Pods[0]
			host := hostLink(t, p)
			if host.Type() != tc.kind {
				t.Fatalf("host side is a %s, want a %s", host.Type(), tc.kind)
			}
			if nk, ok := host.(*netlink.Netkit); ok {
				if !nk.IsPrimary() || nk.Mode != netlink.NETKIT_MODE_L2 ||
					nk.Policy != netlink.NETKIT_POLICY_BLACKHOLE || nk.PeerPolicy != netlink.NETKIT_POLICY_BLACKHOLE {
					t.Fatalf("netkit primary %v, mode %v, policy %v, peer policy %v: want a primary, L2, blackhole both ways",
						nk.IsPrimary(), nk.Mode, nk.Policy, nk.PeerPolicy)
				}
			}
			l := podlink.Link{NodeNetNS: p.Node.NS, PodNetNS: p.NS, PodIfName: "eth0",
				HostIfName: p.HostDevice, IPv4: p.IP, Device: tc.device}
			idx := host.Attrs().Index
			if err := podlink.Check(l, idx); err != nil {
				t.Fatalf("check: %v", err)
			}
			wrong := l
			wrong.Device = tc.other
			if err := podlink.Check(wrong, idx); err == nil {
				t.Fatalf("check as a %s passed", tc.other)
			}
			if err := podlink.Check(l, idx+1000); err == nil {
				t.Fatal("check with another ifindex passed")
			}
			for range 2 {
				if err := podlink.Delete(p.Node.NS, p.HostDevice); err != nil {
					t.Fatalf("delete: %v", err)
				}
			}
			if err := podlink.Check(l, idx); err == nil {
				t.Fatal("check passed after delete")
			}
		})
	}
}

// A netkit pair carries nothing until the endpoint's programs are
// attached: a pod the agent has not programmed yet can neither send nor
// receive. A veth pair under plain routing carries traffic, which shows
// the topology itself is sound.
func TestPrivilegedPodLinkBeforePrograms(t *testing.T) {
	for _, tc := range []struct {
		device podlink.Device
		passes bool
	}{
		{podlink.DeviceVeth, true},
		{podlink.DeviceNetkit, false},
	} {
		t.Run(string(tc.device), func(t *testing.T) {
			c := newCluster(t, dptest.Options{Plain: true, Nodes: 1, PodsPerNode: 1, PodDevice: tc.device})
			n := c.Nodes[0]
			p := n.Pods[0]
			if err := dptest.Ping(n.NS, p.IP); (err == nil) != tc.passes {
				t.Errorf("node to pod: %v, want passing %v", err, tc.passes)
			}
			if err := dptest.Ping(p.NS, n.IP); (err == nil) != tc.passes {
				t.Errorf("pod to node: %v, want passing %v", err, tc.passes)
			}
		})
	}
}

// ProbeNetkit answers as creating a netkit pod pair does, leaves nothing
// behind, and a netkit node on a kernel without netkit refuses to start
// before it pins or attaches anything.
func TestPrivilegedProbeNetkit(t *testing.T) {
	c := newCluster(t, dptest.Options{Plain: true, Nodes: 1, PodsPerNode: 1})
	n := c.Nodes[0]
	probe := podlink.ProbeNetkit(n.NS)
	if probe != nil && !errors.Is(probe, podlink.ErrNetkitUnsupported) {
		t.Fatalf("probe: %v", probe)
	}
	nk, err := dptest.New(dptest.Options{Plain: true, Nodes: 1, PodsPerNode: 1, PodDevice: podlink.DeviceNetkit})
	if err == nil {
		err = nk.Close()
	}
	if errors.Is(err, podlink.ErrNetkitUnsupported) != (probe != nil) {
		t.Fatalf("probe says %v, creating a netkit pod pair says %v", probe, err)
	}
	links := linkNames(t, n.NS)
	if slices.ContainsFunc(links, func(name string) bool { return strings.HasPrefix(name, "cilium_nkprobe") }) {
		t.Fatalf("the probe left its pair: %v", links)
	}
	if probe == nil {
		t.Skip("this kernel has netkit: nothing refuses to start")
	}
	root := testnode.TempBPFFS(t)
	dir := filepath.Join(root, "node")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	node, err := datapath.NewNode(datapath.Config{BPFFSDir: dir, NetNS: n.NS, NodeIPv4: n.IP, Uplink: "eth0",
		Mode: spec.Native, PodDevice: podlink.DeviceNetkit}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); !errors.Is(err, podlink.ErrNetkitUnsupported) {
		t.Fatalf("start: %v, want %v", err, podlink.ErrNetkitUnsupported)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("a refused start left %v in %s (%v)", left, dir, err)
	}
}

func linkNames(t *testing.T, nsPath string) []string {
	t.Helper()
	links, err := handleIn(t, nsPath).LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	return names
}
