package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
)

// TestPrivilegedCNIConcurrentPods adds and deletes many pods at once, as
// a node does when a Deployment scales: every pod gets its own address
// and endpoint, and afterwards nothing is left behind.
func TestPrivilegedCNIConcurrentPods(t *testing.T) {
	testenv.Privileged(t) // creates network namespaces, veths and BPF programs
	const pods = 20
	dir := t.TempDir()
	plugin := buildPlugin(t, dir)
	nodeNS := testenv.NewNetNS(t)
	addUplink(t, nodeNS, "192.168.78.1/24")
	sock := filepath.Join(dir, "run", "cilium.sock")
	h := startRealAgent(t, []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + sock,
		"--bpf-root=" + testnode.TempBPFFS(t), "--prometheus-serve-addr=", "--ipam-pod-cidr=10.201.0.0/24",
		"--node-ipv4=192.168.78.1", "--routing-mode=native", "--node-netns=" + nodeNS,
		"--enable-health-checking=false"}) // pods' endpoints alone
	t.Cleanup(func() { stopAgent(t, h) })
	rt := newCNIRuntime(t, dir, nodeNS, plugin, sock)

	all := make([]*cniPod, pods)
	for i := range all {
		all[i] = &cniPod{id: fmt.Sprintf("pod-%d", i), ns: testenv.NewNetNS(t)}
	}
	// t.Fatal must not run off the test's goroutine: collect errors.
	run := func(op func(*cniPod) error) []error {
		errs := make([]error, pods)
		var wg sync.WaitGroup
		for i, p := range all {
			wg.Go(func() { errs[i] = op(p) })
		}
		wg.Wait()
		return errs
	}
	start := time.Now()
	addErrs := run(func(p *cniPod) error {
		return rt.inNode(func() error {
			_, err := rt.cni.AddNetworkList(context.Background(), rt.list, rt.rtConf(p))
			return err
		})
	})
	// For information only: timing never decides this test.
	t.Logf("%d concurrent ADDs took %v", pods, time.Since(start))
	for i, err := range addErrs {
		if err != nil {
			t.Errorf("ADD %s: %v", all[i].id, err)
		}
	}
	c := client.New(sock)
	eps, err := c.Endpoints(context.Background())
	if err != nil || len(eps) != pods {
		t.Fatalf("%d endpoints (%v), want %d", len(eps), err, pods)
	}
	seen := map[string]bool{}
	for _, ep := range eps {
		if seen[ep.IPv4] {
			t.Fatalf("address %s given twice", ep.IPv4)
		}
		seen[ep.IPv4] = true
	}

	delErrs := run(func(p *cniPod) error {
		return rt.inNode(func() error { return rt.cni.DelNetworkList(context.Background(), rt.list, rt.rtConf(p)) })
	})
	for i, err := range delErrs {
		if err != nil {
			t.Errorf("DEL %s: %v", all[i].id, err)
		}
	}
	if eps, err := c.Endpoints(context.Background()); err != nil || len(eps) != 0 {
		t.Fatalf("endpoints after DEL: %+v %v", eps, err)
	}
	maps, err := c.Maps(context.Background())
	if err != nil || maps[0].Name != "cilium_lxc" || maps[0].Entries != 0 {
		t.Fatalf("endpoint map after DEL: %+v %v", maps, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state", "ipam.json"))
	var ipamState struct{ Allocations []any }
	if err != nil || json.Unmarshal(b, &ipamState) != nil || len(ipamState.Allocations) != 0 {
		t.Fatalf("addresses held after DEL: %s %v", b, err)
	}
	var links []string
	rt.inNode(func() error {
		ls, err := netlink.LinkList()
		for _, l := range ls {
			switch name := l.Attrs().Name; {
			case l.Type() != "veth", name == "eth0", name == "eth0peer":
			case name == datapath.HostDevice, name == datapath.HostPeerDevice: // the node's, not a pod's
			default:
				links = append(links, l.Attrs().Name)
			}
		}
		return err
	})
	if len(links) != 0 {
		t.Fatalf("veths left in the node: %v", links)
	}
}
