package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
)

// TestPrivilegedCNIThroughLibcni runs the real cilium-cni binary through
// libcni, as a runtime does, against the real agent (its cells, the eBPF
// datapath included) programming a node that is a test-created network
// namespace; the pods are namespaces too.
func TestPrivilegedCNIThroughLibcni(t *testing.T) {
	testenv.Privileged(t) // creates network namespaces, veths and BPF programs
	dir := t.TempDir()
	plugin := buildPlugin(t, dir)
	nodeNS := testenv.NewNetNS(t)
	addUplink(t, nodeNS, "192.168.77.1/24")
	bpf := testnode.TempBPFFS(t)
	sock := filepath.Join(dir, "run", "cilium.sock")
	args := []string{"--state-dir=" + filepath.Join(dir, "state"), "--socket-path=" + sock, "--bpf-root=" + bpf,
		"--prometheus-serve-addr=", "--ipam-pod-cidr=10.200.0.0/24", "--node-ipv4=192.168.77.1", "--uplink=eth0",
		"--routing-mode=tunnel", "--node-netns=" + nodeNS,
		"--enable-health-checking=false"} // pods' endpoints alone
	h := startRealAgent(t, args)
	agentUp := true
	t.Cleanup(func() {
		if agentUp {
			stopAgent(t, h)
		}
	})

	rt := newCNIRuntime(t, dir, nodeNS, plugin, sock)
	pods := []*cniPod{{id: "pod-a", ns: testenv.NewNetNS(t)}, {id: "pod-b", ns: testenv.NewNetNS(t)}}
	for _, p := range pods {
		rt.add(p)
		t.Cleanup(func() { // even when the test fails half way
			if agentUp {
				rt.del(p)
			}
		})
	}

	// An ADD again (the runtime lost the answer) replaces the attachment.
	rt.add(pods[0])

	// The pods have working interfaces: TCP from a to b through the datapath.
	echo, err := dptest.ServeTCPEcho(pods[1].ns, pods[1].ip, 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	if err := dptest.TCPEcho(pods[0].ns, pods[1].ip, 8080); err != nil {
		t.Fatalf("pod a -> pod b: %v", err)
	}
	for _, p := range pods {
		if err := rt.check(p); err != nil {
			t.Fatalf("CHECK %s: %v", p.id, err)
		}
	}

	// A restarted agent restores the endpoints from its state directory
	// and keeps the pods' links and traffic as they were.
	c := client.New(sock)
	ctx := context.Background()
	before, err := c.Endpoints(ctx)
	if err != nil || len(before) != 2 {
		t.Fatalf("endpoints: %+v %v", before, err)
	}
	maps, err := c.Maps(ctx)
	// The node's fifteen maps, and one policy map per endpoint.
	if err != nil || len(maps) != 17 || maps[0].Name != "cilium_lxc" || maps[0].Entries != 2 ||
		!strings.HasPrefix(maps[15].Name, "cilium_policy_0") || maps[15].MaxEntries != 16384 {
		t.Fatalf("maps: %+v %v", maps, err)
	}
	stopAgent(t, h)
	if err := dptest.TCPEcho(pods[0].ns, pods[1].ip, 8080); err != nil {
		t.Fatalf("pod a -> pod b with the agent stopped: %v", err)
	}
	h = startRealAgent(t, args)
	after, err := c.Endpoints(ctx)
	if err != nil || len(after) != 2 || after[0].HostIfindex != before[0].HostIfindex || after[1].HostIfindex != before[1].HostIfindex {
		t.Fatalf("after restart: %+v %v, before %+v", after, err, before)
	}
	if err := dptest.TCPEcho(pods[0].ns, pods[1].ip, 8080); err != nil {
		t.Fatalf("pod a -> pod b after restart: %v", err)
	}
	for _, p := range pods {
		if err := rt.check(p); err != nil {
			t.Fatalf("CHECK %s after restart: %v", p.id, err)
		}
	}

	rt.del(pods[0])
	rt.del(pods[0]) // DEL twice is fine
	if _, err := c.GetEndpoint(ctx, pods[0].id); !client.IsNotFound(err) {
		t.Fatalf("endpoint of a deleted pod: %v", err)
	}
	if rt.hostLinkExists(pods[0]) {
		t.Fatal("host veth of a deleted pod is still there")
	}
	if err := rt.check(pods[0]); err == nil {
		t.Fatal("CHECK passes for a deleted pod")
	}
	eps, err := c.Endpoints(ctx)
	if err != nil || len(eps) != 1 || eps[0].ContainerID != pods[1].id {
		t.Fatalf("endpoints: %+v %v", eps, err)
	}

	// GC with b no longer valid removes it.
	if err := rt.inNode(func() error { return rt.cni.GCNetworkList(ctx, rt.list, &libcni.GCArgs{}) }); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if eps, err := c.Endpoints(ctx); err != nil || len(eps) != 0 || rt.hostLinkExists(pods[1]) {
		t.Fatalf("after GC: %+v %v, veth left %v", eps, err, rt.hostLinkExists(pods[1]))
	}

	vi, err := rt.cni.GetVersionInfo(ctx, "cilium-cni")
	if err != nil || !slices.Contains(vi.SupportedVersions(), "1.1.0") {
		t.Fatalf("VERSION: %v %v", vi, err)
	}
	if err := rt.cni.GetStatusNetworkList(ctx, rt.list); err != nil {
		t.Fatalf("STATUS with the agent up: %v", err)
	}
	stopAgent(t, h)
	agentUp = false
	err = rt.cni.GetStatusNetworkList(ctx, rt.list)
	var cniErr *types.Error
	if !errors.As(err, &cniErr) || cniErr.Code != types.ErrPluginNotAvailable {
		t.Fatalf("STATUS with the agent stopped: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
}

// newCNIRuntime is a runtime on the node that runs the cilium-cni binary
// plugin with a conflist for the agent at sock, as a kubelet's would.
// libcni makes a missing exec on first use, unlocked: given one, a
// CNIConfig serves concurrent ADDs and DELs.
func newCNIRuntime(t *testing.T, dir, nodeNS, plugin, sock string) *cniRuntime {
	plugins := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return &cniRuntime{t: t, nodeNS: nodeNS,
		cni: libcni.NewCNIConfigWithCacheDir([]string{filepath.Dir(plugin)}, filepath.Join(dir, "cni-cache"), plugins),
		list: mustConfList(t, fmt.Sprintf(`{"cniVersion":"1.1.0","name":"cilium","plugins":[
			{"type":"cilium-cni","socket-path":%q}]}`, sock))}
}

type cniRuntime struct {
	t      *testing.T
	nodeNS string
	cni    *libcni.CNIConfig
	list   *libcni.NetworkConfigList
}

type cniPod struct {
	id, ns string
	ip     netip.Addr
	result *current.Result
}

func (r *cniRuntime) rtConf(p *cniPod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns, IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", p.id}}}
}

// inNode runs fn on a thread in the node's namespace: the plugin process
// that libcni starts from there inherits it, as it would on a node.
func (r *cniRuntime) inNode(fn func() error) error { return netnamespace.Do(r.nodeNS, fn) }

func (r *cniRuntime) add(p *cniPod) {
	r.t.Helper()
	var res types.Result
	err := r.inNode(func() (err error) {
		res, err = r.cni.AddNetworkList(context.Background(), r.list, r.rtConf(p))
		return err
	})
	if err != nil {
		r.t.Fatalf("ADD %s: %v", p.id, err)
	}
	if p.result, err = current.NewResultFromResult(res); err != nil {
		r.t.Fatal(err)
	}
	if len(p.result.IPs) != 1 {
		r.t.Fatalf("ADD %s: result %+v", p.id, p.result)
	}
	p.ip, _ = netip.AddrFromSlice(p.result.IPs[0].Address.IP.To4())
	if !netip.MustParsePrefix("10.200.0.0/24").Contains(p.ip) {
		r.t.Fatalf("ADD %s: address %s outside the pod CIDR", p.id, p.ip)
	}
	addrs, mtu := podEth0(r.t, p.ns)
	if !strings.Contains(addrs, p.ip.String()+"/32") {
		r.t.Fatalf("pod %s eth0 has %s, want %s/32", p.id, addrs, p.ip)
	}
	// Tunnel mode: the uplink's 1500 less the VXLAN header, as the agent
	// told the plugin.
	if mtu != 1450 {
		r.t.Fatalf("pod %s eth0 MTU %d, want 1450", p.id, mtu)
	}
}

func (r *cniRuntime) check(p *cniPod) error {
	return r.inNode(func() error { return r.cni.CheckNetworkList(context.Background(), r.list, r.rtConf(p)) })
}

func (r *cniRuntime) del(p *cniPod) {
	r.t.Helper()
	if err := r.inNode(func() error { return r.cni.DelNetworkList(context.Background(), r.list, r.rtConf(p)) }); err != nil {
		r.t.Errorf("DEL %s: %v", p.id, err)
	}
}

func (r *cniRuntime) hostLinkExists(p *cniPod) bool {
	if p.result == nil || len(p.result.Interfaces) == 0 {
		return false
	}
	found := false
	r.inNode(func() error {
		_, err := netlink.LinkByName(p.result.Interfaces[0].Name)
		found = err == nil
		return nil
	})
	return found
}

func podEth0(t *testing.T, ns string) (addrs string, mtu int) {
	t.Helper()
	var out []string
	testenv.InNetNS(t, ns, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		mtu = l.Attrs().MTU
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		for _, a := range addrs {
			out = append(out, a.IPNet.String())
		}
		return err
	})
	return strings.Join(out, " "), mtu
}

func mustConfList(t *testing.T, s string) *libcni.NetworkConfigList {
	l, err := libcni.NetworkConfFromBytes([]byte(s))
	if err != nil {
		t.Fatalf("conflist: %v", err)
	}
	if !json.Valid([]byte(s)) {
		t.Fatal("conflist is not JSON")
	}
	return l
}

// buildPlugin compiles cmd/cilium-cni into dir/bin/cilium-cni; with
// CILIUM_CNI_BIN set (a machine without Go, such as make
// test-netkit-vm's), it uses that binary instead.
func buildPlugin(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "bin", "cilium-cni")
	if bin := os.Getenv("CILIUM_CNI_BIN"); bin != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// go test puts its own toolchain's bin first on the test's PATH.
	cmd := exec.Command("go", "build", "-o", out, "../cilium-cni")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cilium-cni: %v\n%s", err, b)
	}
	return out
}

func startRealAgent(t *testing.T, args []string) *hive.Hive {
	t.Helper()
	h, err := startHive(t, newHive(newLevel(), Infrastructure, ControlPlane, Datapath, Observability), args)
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	return h
}

func stopAgent(t *testing.T, h *hive.Hive) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Stop(testLogger(t), ctx); err != nil {
		t.Errorf("stop agent: %v", err)
	}
}

// addUplink gives the node an eth0 with its address: the datapath wants
// an uplink. Its peer stays in the node, so nothing leaves the node.
func addUplink(t *testing.T, ns, cidr string) {
	t.Helper()
	if err := testnode.AddUplink(ns, cidr); err != nil {
		t.Fatal(err)
	}
}
