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
	"strings"
	"testing"
	"time"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/testnode"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/identity"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
)

// healthNode is one node of the health tests: a namespace on the
// underlay with a real agent (fake API servers shared by both nodes).
type healthNode struct {
	name, ns, dir string
	ip            netip.Addr
	cidr          netip.Prefix
	h             *hive.Hive
}

func (n *healthNode) healthSock() string { return filepath.Join(n.dir, "run", "health.sock") }
func (n *healthNode) apiSock() string    { return filepath.Join(n.dir, "run", "cilium.sock") }

// underlay makes a bridge in a namespace of its own and nodes on it, each
// with eth0 at its address /24.
func underlay(t *testing.T, nodes ...*healthNode) {
	t.Helper()
	u := testenv.NewNetNS(t)
	ul, err := netnamespace.Netlink(u)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := ul.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	if err := ul.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n.ns = testenv.NewNetNS(t)
		nl, err := netnamespace.Netlink(n.ns)
		if err != nil {
			t.Fatal(err)
		}
		defer nl.Close()
		nsf, err := os.Open(n.ns)
		if err != nil {
			t.Fatal(err)
		}
		defer nsf.Close()
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "to-" + n.name, MasterIndex: br.Attrs().Index},
			PeerName: "eth0", PeerNamespace: netlink.NsFd(int(nsf.Fd()))}
		if err := ul.LinkAdd(v); err != nil {
			t.Fatal(err)
		}
		if err := ul.LinkSetUp(v); err != nil {
			t.Fatal(err)
		}
		eth0, err := nl.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr(n.ip.String() + "/24")
		if err := nl.AddrAdd(eth0, addr); err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(eth0); err != nil {
			t.Fatal(err)
		}
	}
}

// healthArgs are n's agent's flags: its real datapath in its namespace,
// its state in n.dir.
func healthArgs(n *healthNode, bpfRoot string, extra ...string) []string {
	return append([]string{"--state-dir=" + filepath.Join(n.dir, "state"), "--socket-path=" + n.apiSock(),
		"--bpf-root=" + bpfRoot, "--prometheus-serve-addr=", "--node-ipv4=" + n.ip.String(),
		"--uplink=eth0", "--routing-mode=tunnel", "--node-netns=" + n.ns, "--k8s-node-name=" + n.name}, extra...)
}

// startHealthAgent starts an agent with args on the fakes.
func startHealthAgent(t *testing.T, clients *k8sagent.Clients, args []string) *hive.Hive {
	t.Helper()
	withFakes := cell.Decorate(func(*k8sagent.Clients) *k8sagent.Clients { return clients }, ControlPlane)
	h, err := startHive(t, newHive(newLevel(), Infrastructure, withFakes, Datapath, Observability), args)
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	return h
}

// removeHealthLink removes what n's agents left: the health endpoint
// outlives its agent, as pods do.
func removeHealthLink(t *testing.T, n *healthNode) {
	hl := datapath.HealthLink{NodeNetNS: n.ns, NetNS: filepath.Join(n.dir, "run", "netns", "cilium-health")}
	if err := hl.Remove(); err != nil {
		t.Error(err)
	}
}

// startHealthNode starts n's agent with its real datapath on the fakes.
func startHealthNode(t *testing.T, n *healthNode, clients *k8sagent.Clients) {
	t.Helper()
	n.dir = t.TempDir()
	n.h = startHealthAgent(t, clients, healthArgs(n, testnode.TempBPFFS(t)))
	t.Cleanup(func() {
		stopAgent(t, n.h)
		removeHealthLink(t, n)
	})
}

// buildHealthCLI builds cmd/cilium-health, the real client.
func buildHealthCLI(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cilium-health")
	if b, err := exec.Command("go", "build", "-o", out, "../cilium-health").CombinedOutput(); err != nil {
		t.Fatalf("build cilium-health: %v\n%s", err, b)
	}
	return out
}

// probeJSON runs `cilium-health status --probe -o json` against n and
// decodes the output with Cilium's health models.
func probeJSON(cli string, n *healthNode) (*healthmodels.HealthStatusResponse, error) {
	cmd := exec.Command(cli, "-H", "unix://"+n.healthSock(), "status", "--probe", "-o", "json")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("cilium-health: %w: %s", err, ee.Stderr)
		}
		return nil, err
	}
	sr := &healthmodels.HealthStatusResponse{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(sr); err != nil {
		return nil, fmt.Errorf("decode %s: %w", out, err)
	}
	return sr, nil
}

// pathOK says what is wrong with a path that should be reachable.
func pathOK(what string, ps *healthmodels.PathStatus, ip string) error {
	switch {
	case ps == nil:
		return fmt.Errorf("%s: no path", what)
	case ps.IP != ip:
		return fmt.Errorf("%s: probed %s, want %s", what, ps.IP, ip)
	case ps.Icmp == nil || ps.Icmp.Status != "" || ps.Icmp.Latency <= 0 || ps.Icmp.LastProbed == "":
		return fmt.Errorf("%s: ICMP %+v", what, ps.Icmp)
	case ps.HTTP == nil || ps.HTTP.Status != "" || ps.HTTP.Latency <= 0:
		return fmt.Errorf("%s: HTTP %+v", what, ps.HTTP)
	}
	return nil
}

// pathDown says what is wrong with a path that should be unreachable.
func pathDown(what string, ps *healthmodels.PathStatus) error {
	switch {
	case ps == nil:
		return fmt.Errorf("%s: no path", what)
	case ps.Icmp == nil || ps.Icmp.Status == "":
		return fmt.Errorf("%s: ICMP reachable: %+v", what, ps.Icmp)
	case ps.HTTP == nil || ps.HTTP.Status == "":
		return fmt.Errorf("%s: HTTP reachable: %+v", what, ps.HTTP)
	}
	return nil
}

func nodeStatus(sr *healthmodels.HealthStatusResponse, name string) *healthmodels.NodeStatus {
	for _, n := range sr.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// TestPrivilegedHealthTwoNodes runs two real agents on two node
// namespaces joined by an underlay bridge. Each makes its health
// endpoint (reserved identity health, an address from its pod CIDR,
// published in its CiliumNode), and cilium-health on node a reports both
// nodes and both health endpoints reachable over ICMP and HTTP, in
// Cilium's health models. With node b's uplink down, b and its health
// endpoint are reported unreachable and a stays reachable.
func TestPrivilegedHealthTwoNodes(t *testing.T) {
	testenv.Privileged(t) // namespaces, veths, BPF programs
	cli := buildHealthCLI(t)
	a := &healthNode{name: "a", ip: netip.MustParseAddr("192.168.61.1"), cidr: netip.MustParsePrefix("10.61.1.0/24")}
	b := &healthNode{name: "b", ip: netip.MustParseAddr("192.168.61.2"), cidr: netip.MustParsePrefix("10.61.2.0/24")}
	underlay(t, a, b)
	kube := kubefake.NewClientset(k8stest.Node("a", a.ip.String(), ""), k8stest.Node("b", b.ip.String(), ""),
		k8stest.Namespace("default", nil),
		k8stest.Pod("default", "client", func(p *corev1.Pod) { p.Spec.NodeName = "a" }))
	cilium := k8sclient.NewFake(k8stest.CiliumNode("a", a.ip.String(), a.cidr.String()),
		k8stest.CiliumNode("b", b.ip.String(), b.cidr.String()))
	clients := &k8sagent.Clients{Kube: kube, Cilium: cilium}
	startHealthNode(t, a, clients)
	startHealthNode(t, b, clients)
	ctx := context.Background()

	// Each node publishes its health endpoint, from its pod CIDR, with
	// the health identity.
	health := map[string]string{}
	for _, n := range []*healthNode{a, b} {
		testenv.Eventually(t, time.Minute, func() error {
			cn, err := cilium.CiliumV2().CiliumNodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(cn.Spec.HealthAddressing.IPv4)
			if err != nil || !n.cidr.Contains(ip) {
				return fmt.Errorf("CiliumNode %s spec.health.ipv4 %q: want an address of %s", n.name, cn.Spec.HealthAddressing.IPv4, n.cidr)
			}
			health[n.name] = ip.String()
			return nil
		})
		eps, err := client.New(n.apiSock()).Endpoints(ctx)
		if err != nil || len(eps) != 1 || eps[0].Identity != identity.Health || eps[0].IPv4 != health[n.name] ||
			eps[0].HostIfName != "lxc_health" {
			t.Fatalf("node %s endpoints %+v %v: want the health endpoint at %s", n.name, eps, err, health[n.name])
		}
	}

	var sr *healthmodels.HealthStatusResponse
	testenv.Eventually(t, time.Minute, func() (err error) {
		if sr, err = probeJSON(cli, a); err != nil {
			return err
		}
		if sr.Local == nil || sr.Local.Name != "a" || len(sr.Nodes) != 2 {
			return fmt.Errorf("status %+v: want local a and 2 nodes", sr)
		}
		for _, n := range []*healthNode{a, b} {
			ns := nodeStatus(sr, n.name)
			if ns == nil || ns.Host == nil || ns.HealthEndpoint == nil {
				return fmt.Errorf("node %s: %+v", n.name, ns)
			}
			if err := pathOK(n.name+" host", ns.Host.PrimaryAddress, n.ip.String()); err != nil {
				return err
			}
			if err := pathOK(n.name+" health endpoint", ns.HealthEndpoint.PrimaryAddress, health[n.name]); err != nil {
				return err
			}
		}
		return nil
	})
	if sr.ProbeInterval != "1m0s" {
		t.Errorf("probe interval %q, want Cilium's 1m0s", sr.ProbeInterval)
	}
	// The table, as Cilium's cilium-health prints it.
	out, err := exec.Command(cli, "-H", a.healthSock(), "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Cluster health:") || !strings.Contains(string(out), "2/2 reachable") {
		t.Fatalf("cilium-health status: %v\n%s", err, out)
	}

	// A pod reaches neither node's health endpoint, on the probes' port
	// or by ping: only the nodes and health endpoints may (the health
	// endpoint's own rule). The node's responder answers it: the pod's
	// traffic flows, and the health endpoints' policy is what refuses.
	pod := startPod(t, a, "client")
	for _, n := range []*healthNode{a, b} {
		ip := netip.MustParseAddr(health[n.name])
		if c, err := dptest.DialTCP(pod, ip, 4240, 2*time.Second); err == nil {
			c.Close()
			t.Errorf("pod on a connected to %s's health endpoint %s:4240", n.name, ip)
		}
		if err := dptest.Ping(pod, ip); err == nil {
			t.Errorf("pod on a pinged %s's health endpoint %s", n.name, ip)
		}
	}
	if err := podHello(pod, a.ip); err != nil {
		t.Errorf("pod on a -> node a's responder: %v", err)
	}

	// Node b drops off the underlay.
	testenv.InNetNS(t, b.ns, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.LinkSetDown(l)
	})
	testenv.Eventually(t, time.Minute, func() (err error) {
		if sr, err = probeJSON(cli, a); err != nil {
			return err
		}
		nb, na := nodeStatus(sr, "b"), nodeStatus(sr, "a")
		if nb == nil || na == nil || nb.Host == nil || nb.HealthEndpoint == nil {
			return fmt.Errorf("status %+v", sr)
		}
		if err := pathDown("b host", nb.Host.PrimaryAddress); err != nil {
			return err
		}
		if err := pathDown("b health endpoint", nb.HealthEndpoint.PrimaryAddress); err != nil {
			return err
		}
		return pathOK("a host", na.Host.PrimaryAddress, a.ip.String())
	})
	out, err = exec.Command(cli, "-H", a.healthSock(), "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1/2 reachable") {
		t.Fatalf("cilium-health status with b down: %v\n%s", err, out)
	}
}

// startPod adds pod name (a Pod in namespace default) on node n through
// the real cilium-cni, as a runtime does, and returns its namespace.
func startPod(t *testing.T, n *healthNode, name string) string {
	t.Helper()
	rt := newCNIRuntime(t, n.dir, n.ns, buildPlugin(t, t.TempDir()), n.apiSock())
	p := &cniPod{id: name, ns: testenv.NewNetNS(t)}
	if err := rt.inNode(func() error {
		_, err := rt.cni.AddNetworkList(context.Background(), rt.list, rt.rtConf(p))
		return err
	}); err != nil {
		t.Fatalf("ADD %s: %v", name, err)
	}
	t.Cleanup(func() { rt.del(p) })
	return p.ns
}

// podHello is GET /hello on ip:4240 from the pod's namespace.
func podHello(ns string, ip netip.Addr) error {
	c, err := dptest.DialTCP(ns, ip, 4240, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET /hello HTTP/1.0\r\n\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.0 200") {
		return fmt.Errorf("answer %q", buf[:n])
	}
	return nil
}

// TestPrivilegedHealthEndpointAcrossRestarts: a restarted agent makes
// its health endpoint afresh (one endpoint, reachable again, which the
// CNI's API cannot delete), and one started with
// --enable-endpoint-health-checking=false removes it: endpoint, address,
// device and the CiliumNode's spec.health.ipv4.
func TestPrivilegedHealthEndpointAcrossRestarts(t *testing.T) {
	testenv.Privileged(t)
	cli := buildHealthCLI(t)
	n := &healthNode{name: "solo", ip: netip.MustParseAddr("192.168.62.1"), cidr: netip.MustParsePrefix("10.62.0.0/24")}
	n.ns, n.dir = testenv.NewNetNS(t), t.TempDir()
	addUplink(t, n.ns, n.ip.String()+"/24")
	cilium := k8sclient.NewFake(k8stest.CiliumNode(n.name, n.ip.String(), n.cidr.String()))
	clients := &k8sagent.Clients{Kube: kubefake.NewClientset(k8stest.Node(n.name, n.ip.String(), "")), Cilium: cilium}
	args := healthArgs(n, testnode.TempBPFFS(t))
	t.Cleanup(func() { removeHealthLink(t, n) })
	ctx := context.Background()
	healthy := func() error {
		sr, err := probeJSON(cli, n)
		if err != nil {
			return err
		}
		if len(sr.Nodes) != 1 || sr.Nodes[0].Host == nil || sr.Nodes[0].HealthEndpoint == nil {
			return fmt.Errorf("nodes %+v", sr.Nodes)
		}
		if err := pathOK("host", sr.Nodes[0].Host.PrimaryAddress, n.ip.String()); err != nil {
			return err
		}
		return pathOK("health endpoint", sr.Nodes[0].HealthEndpoint.PrimaryAddress, sr.Nodes[0].HealthEndpoint.PrimaryAddress.IP)
	}
	hostLink := func() bool {
		found := false
		testenv.InNetNS(t, n.ns, func() error {
			_, err := netlink.LinkByName("lxc_health")
			found = err == nil
			return nil
		})
		return found
	}
	for i := range 2 {
		h := startHealthAgent(t, clients, args)
		testenv.Eventually(t, time.Minute, healthy)
		eps, err := client.New(n.apiSock()).Endpoints(ctx)
		if err != nil || len(eps) != 1 || eps[0].Identity != identity.Health {
			t.Fatalf("start %d: endpoints %+v %v", i, eps, err)
		}
		// The CNI's API does not delete it.
		if err := client.New(n.apiSock()).DeleteEndpoint(ctx, "cilium-health"); err == nil {
			t.Fatalf("start %d: the API deleted the health endpoint", i)
		}
		// Its responder was the agent: a stopped agent takes it along.
		stopAgent(t, h)
		if _, err := os.Stat(filepath.Join(n.dir, "run", "netns", "cilium-health")); hostLink() || err == nil {
			t.Fatalf("stop %d: the health endpoint's device (%v) or namespace (%v) stayed", i, hostLink(), err)
		}
	}

	h := startHealthAgent(t, clients, append(args, "--enable-endpoint-health-checking=false"))
	defer stopAgent(t, h)
	testenv.Eventually(t, time.Minute, func() error {
		eps, err := client.New(n.apiSock()).Endpoints(ctx)
		if err != nil || len(eps) != 0 {
			return fmt.Errorf("endpoints %+v %v", eps, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		allocs, err := client.New(n.apiSock()).Allocations(ctx)
		if err != nil || len(allocs) != 0 {
			return fmt.Errorf("allocations %+v %v", allocs, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		if hostLink() {
			return errors.New("lxc_health is still there")
		}
		cn, err := cilium.CiliumV2().CiliumNodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil || cn.Spec.HealthAddressing.IPv4 != "" {
			return fmt.Errorf("CiliumNode health %+v %v", cn.Spec.HealthAddressing, err) //nolint:errorlint // err may be nil: shown beside the state, not wrapped
		}
		return nil
	})
	sr, err := probeJSON(cli, n)
	if err != nil || len(sr.Nodes) != 1 || sr.Nodes[0].HealthEndpoint != nil ||
		pathOK("host", sr.Nodes[0].Host.PrimaryAddress, n.ip.String()) != nil {
		t.Fatalf("without endpoint health checking: %+v %v", sr, err)
	}
}

// TestPrivilegedHealthWithoutKubernetes: without the cluster the agent
// probes its own node and runs no health endpoint, as the node's own
// address is not in its ipcache.
func TestPrivilegedHealthWithoutKubernetes(t *testing.T) {
	testenv.Privileged(t)
	cli := buildHealthCLI(t)
	n := &healthNode{name: "solo", ip: netip.MustParseAddr("192.168.63.1")}
	n.ns, n.dir = testenv.NewNetNS(t), t.TempDir()
	addUplink(t, n.ns, n.ip.String()+"/24")
	h := startRealAgent(t, []string{"--state-dir=" + filepath.Join(n.dir, "state"), "--socket-path=" + n.apiSock(),
		"--bpf-root=" + testnode.TempBPFFS(t), "--prometheus-serve-addr=", "--node-ipv4=" + n.ip.String(),
		"--uplink=eth0", "--routing-mode=tunnel", "--node-netns=" + n.ns, "--ipam-pod-cidr=10.63.0.0/24"})
	t.Cleanup(func() { stopAgent(t, h) })
	sr, err := probeJSON(cli, n)
	if err != nil || len(sr.Nodes) != 1 || sr.Nodes[0].HealthEndpoint != nil || sr.Nodes[0].Host == nil {
		t.Fatalf("status %+v %v", sr, err)
	}
	if err := pathOK("host", sr.Nodes[0].Host.PrimaryAddress, n.ip.String()); err != nil {
		t.Fatal(err)
	}
	if eps, err := client.New(n.apiSock()).Endpoints(context.Background()); err != nil || len(eps) != 0 {
		t.Fatalf("endpoints %+v %v", eps, err)
	}
}
