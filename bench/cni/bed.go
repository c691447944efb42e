package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// node is a node namespace with one CNI network and pod namespaces to
// add to it.
type node struct {
	name string
	ns   string
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
	pods []pod
}

type pod struct{ id, ns string }

// bed is the two nodes under test: one served by cilium-cni and a real
// agent, one by bridge and host-local.
type bed struct {
	cilium, bridge *node
	agent          *testnode.Agent
}

const (
	ciliumNodeIP = "192.168.79.1/24"
	ciliumCIDR   = "10.210.0.0/24"
	bridgeCIDR   = "10.211.0.0/24"
)

// newBed makes the nodes and their pods and starts the agent; onClose
// gets the undo of each step.
func newBed(ctx context.Context, dir, bin string, o options, onClose func(func() error)) (*bed, error) {
	nsDir := filepath.Join(dir, "netns")
	if err := os.Mkdir(nsDir, 0o700); err != nil {
		return nil, err
	}
	newNS := func(name string) (string, error) {
		path := filepath.Join(nsDir, name)
		remove, err := netnamespace.Create(path)
		if err != nil {
			return "", err
		}
		onClose(remove)
		return path, nil
	}
	newNode := func(name string, pods int) (*node, error) {
		n := &node{name: name}
		var err error
		if n.ns, err = newNS(name); err != nil {
			return nil, err
		}
		for i := range pods {
			p := pod{id: fmt.Sprintf("%s-pod-%d", name, i)}
			if p.ns, err = newNS(p.id); err != nil {
				return nil, err
			}
			n.pods = append(n.pods, p)
		}
		// The reference plugins sit in bin/cni, cilium-cni in bin. The
		// ADDs run at once: libcni makes a missing exec on first use,
		// unlocked, so it gets one.
		n.cni = libcni.NewCNIConfigWithCacheDir([]string{bin, filepath.Join(bin, "cni")},
			filepath.Join(dir, "cni-cache-"+name),
			&invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}})
		return n, nil
	}

	b := &bed{}
	var err error
	if b.cilium, err = newNode("cilium", max(o.pods, o.endpoints)); err != nil {
		return nil, err
	}
	if b.bridge, err = newNode("bridge", o.pods); err != nil {
		return nil, err
	}
	if err := testnode.AddUplink(b.cilium.ns, ciliumNodeIP); err != nil {
		return nil, err
	}
	bpfRoot, unmount, err := testnode.MountBPFFS(dir)
	if err != nil {
		return nil, err
	}
	onClose(unmount)
	nodeIP := netip.MustParsePrefix(ciliumNodeIP).Addr()
	b.agent, err = testnode.StartAgent(ctx, testnode.AgentConfig{Binary: filepath.Join(bin, "cilium-agent"),
		Dir: filepath.Join(dir, "agent"), NodeNS: b.cilium.ns, BPFRoot: bpfRoot,
		Args: []string{"--ipam-pod-cidr=" + ciliumCIDR, "--node-ipv4=" + nodeIP.String(), "--uplink=eth0",
			"--routing-mode=" + o.routingMode}})
	if err != nil {
		return nil, err
	}
	onClose(b.agent.Stop)

	return b, b.networks(dir)
}

// networks sets the two nodes' network configuration lists.
func (b *bed) networks(dir string) (err error) {
	if b.cilium.list, err = libcni.NetworkConfFromBytes(fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":"cilium",
		"plugins":[{"type":"cilium-cni","socket-path":%q}]}`, b.agent.Socket)); err != nil {
		return err
	}
	// A gateway on the bridge and a default route in the pod, as cilium-cni
	// gives; no masquerade, which would add iptables to one side only.
	// bridge as released: its ADD polls the host veth until it is up
	// (after 0, 50, 500 ms...), which is part of the baseline a node sees.
	if b.bridge.list, err = libcni.NetworkConfFromBytes(fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":"bridge",
		"plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,
		"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}}]}`,
		bridgeCIDR, filepath.Join(dir, "host-local"))); err != nil {
		return err
	}
	return nil
}

// rtConf is what a runtime passes for pod p; IgnoreUnknown, as runtimes
// send it, lets bridge accept the Kubernetes arguments it has no use for.
func rtConf(p pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", p.id}}}
}

// addAll runs CNI ADD for pods, at most width at a time, each from a
// thread in the node's namespace as a runtime on the node would, and
// returns each ADD's latency. All start together once their threads are
// in place. It checks that every pod got one address of its own.
func (n *node) addAll(ctx context.Context, pods []pod, width int) ([]time.Duration, error) {
	lat := make([]time.Duration, len(pods))
	ips := make([]netip.Addr, len(pods))
	errs := make([]error, len(pods))
	start := make(chan struct{})
	slots := make(chan struct{}, width)
	var ready, done sync.WaitGroup
	for i, p := range pods {
		ready.Add(1)
		done.Go(func() {
			waiting := true
			errs[i] = netnamespace.Do(n.ns, func() error {
				waiting = false
				ready.Done()
				<-start
				slots <- struct{}{}
				defer func() { <-slots }()
				t0 := time.Now()
				r, err := n.cni.AddNetworkList(ctx, n.list, rtConf(p))
				lat[i] = time.Since(t0)
				if err == nil {
					ips[i], err = onlyIP(r)
				}
				if err != nil {
					return fmt.Errorf("ADD %s: %w", p.id, err)
				}
				return nil
			})
			if waiting { // never reached the barrier
				ready.Done()
			}
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
	if got := len(slices.Compact(ips)); got != len(pods) {
		return nil, fmt.Errorf("%s: %d distinct addresses for %d pods", n.name, got, len(pods))
	}
	return lat, nil
}

// onlyIP is the one IPv4 address of an ADD result.
func onlyIP(r types.Result) (netip.Addr, error) {
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("result: %w", err)
	}
	if len(res.IPs) != 1 {
		return netip.Addr{}, fmt.Errorf("result has %d addresses, want 1", len(res.IPs))
	}
	a, ok := netip.AddrFromSlice(res.IPs[0].Address.IP.To4())
	if !ok {
		return netip.Addr{}, fmt.Errorf("result address %v is not IPv4", res.IPs[0].Address.IP)
	}
	return a, nil
}

// delAll runs CNI DEL for pods, all at once.
func (n *node) delAll(ctx context.Context, pods []pod) error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			errs[i] = netnamespace.Do(n.ns, func() error {
				if err := n.cni.DelNetworkList(ctx, n.list, rtConf(p)); err != nil {
					return fmt.Errorf("DEL %s: %w", p.id, err)
				}
				return nil
			})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
