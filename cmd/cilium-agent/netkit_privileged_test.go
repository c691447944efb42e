package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/internal/testenv"
)

// TestPrivilegedNetkitMode: with --datapath-mode=netkit the agent either
// refuses to start, naming netkit, on a kernel without it (pinning
// nothing), or its pods get netkit pairs through the real cilium-cni and
// talk through them.
func TestPrivilegedNetkitMode(t *testing.T) {
	testenv.Privileged(t) // creates network namespaces and BPF programs
	dir := t.TempDir()
	nodeNS := testenv.NewNetNS(t)
	addUplink(t, nodeNS, "192.168.78.1/24")
	bpf := testnode.TempBPFFS(t)
	sock := filepath.Join(dir, "run", "cilium.sock")
	args := []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + sock, "--bpf-root=" + bpf,
		"--prometheus-serve-addr=", "--ipam-pod-cidr=10.200.0.0/24", "--node-ipv4=192.168.78.1", "--uplink=eth0",
		"--routing-mode=tunnel", "--node-netns=" + nodeNS, "--datapath-mode=netkit", "--enable-host-legacy-routing=false"}
	probe := podlink.ProbeNetkit(nodeNS)
	if probe != nil && !errors.Is(probe, podlink.ErrNetkitUnsupported) {
		t.Fatal(probe)
	}
	h, err := startHive(t, newHive(newLevel(), Infrastructure, ControlPlane, Datapath, Observability), args)
	if probe != nil {
		if err == nil {
			stopAgent(t, h)
			t.Fatal("the agent started in netkit mode on a kernel without netkit")
		}
		if !strings.Contains(err.Error(), "netkit pod devices") || !errors.Is(err, podlink.ErrNetkitUnsupported) {
			t.Fatalf("start: %v, want it to name netkit", err)
		}
		if pins, _ := filepath.Glob(filepath.Join(bpf, "*", "*")); len(pins) != 0 {
			t.Fatalf("a refused start pinned %v", pins)
		}
		return
	}
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	t.Cleanup(func() { stopAgent(t, h) })
	rt := newCNIRuntime(t, dir, nodeNS, buildPlugin(t, dir), sock)
	pods := []*cniPod{{id: "pod-a", ns: testenv.NewNetNS(t)}, {id: "pod-b", ns: testenv.NewNetNS(t)}}
	for _, p := range pods {
		rt.add(p)
		t.Cleanup(func() { rt.del(p) })
		var kind string
		rt.inNode(func() error {
			l, err := netlink.LinkByName(p.result.Interfaces[0].Name)
			if err == nil {
				kind = l.Type()
			}
			return err
		})
		if kind != "netkit" {
			t.Fatalf("%s: host side is a %q, want netkit", p.id, kind)
		}
		if err := rt.check(p); err != nil {
			t.Fatalf("CHECK %s: %v", p.id, err)
		}
	}
	echo, err := dptest.ServeTCPEcho(pods[1].ns, pods[1].ip, 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	if err := dptest.TCPEcho(pods[0].ns, pods[1].ip, 8080); err != nil {
		t.Fatalf("pod a -> pod b over netkit: %v", err)
	}
}
