package cluster

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
)

// labBinDir returns the directory of built lab binaries (LAB_BIN_DIR, or the
// repository's bin/), or skips; extra names binaries a test needs besides
// the lab's own.
func labBinDir(t *testing.T, extra ...string) string {
	t.Helper()
	dir := os.Getenv("LAB_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "bin")
	}
	dir, _ = filepath.Abs(dir)
	for _, b := range append([]string{"cilium-lab", "kube-apiserver", "agnhost", "coredns", "cni/bridge"}, extra...) {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Skipf("%s is not built: run `make build` or set LAB_BIN_DIR", filepath.Join(dir, b))
		}
	}
	return dir
}

// testLab is a whole lab brought up for one test, removed again when it ends.
type testLab struct {
	p      plan.Plan
	binDir string
	cs     kubernetes.Interface
}

// upTestLab brings up a lab with the reference bridge CNI, tweaked, under a name
// and in a state directory of its own, on a free API port.
func upTestLab(t *testing.T, tweak func(*plan.Options)) *testLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: brings up a lab")
	}
	binDir := labBinDir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	o := plan.DefaultOptions()
	o.Name = fmt.Sprintf("lt%d", os.Getpid()%100000)
	o.StateDir = filepath.Join(t.TempDir(), "state")
	o.CNI = plan.CNIBridge
	o.APIPort = port
	// Out of the way of a default lab that may run beside the test.
	o.Underlay = mustPrefix("172.31.250.0/24")
	o.ClusterCIDR = mustPrefix("10.250.0.0/16")
	o.ServiceCIDR = mustPrefix("10.251.0.0/16")
	tweak(&o)
	t.Cleanup(func() {
		if err := Down(o.StateDir); err != nil {
			t.Errorf("down: %v", err)
		}
		if err := Down(o.StateDir); err != nil {
			t.Errorf("down again: %v", err)
		}
		if m, _ := filepath.Glob("/run/netns/" + o.Name + "-*"); len(m) > 0 {
			t.Errorf("namespaces left behind: %v", m)
		}
		if m, _ := filepath.Glob("/sys/fs/cgroup/*/cilium-lab-" + o.Name); len(m) > 0 {
			t.Errorf("cgroups left behind: %v", m)
		}
		if m, _ := filepath.Glob("/sys/fs/cgroup/cilium-lab-" + o.Name); len(m) > 0 {
			t.Errorf("cgroups left behind: %v", m)
		}
	})
	var out bytes.Buffer
	err = Up(t.Context(), UpOptions{Plan: o, BinDir: binDir, Timeout: 3 * time.Minute, Out: &out})
	t.Logf("up:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Load(o.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(o.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testLab{p: p, binDir: binDir, cs: cs}
}

// labCmd runs `cilium-lab ARGS...` against the test lab.
func (l *testLab) labCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.binDir, "cilium-lab"), append([]string{"--state-dir", l.p.StateDir}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runPod creates a pod on a node and waits until it runs.
func (l *testLab) runPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if _, err := l.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	eventually(t, 2*time.Minute, "pod "+pod.Name+" running", func() error {
		var err error
		got, err = l.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodRunning || got.Status.PodIP == "" {
			return fmt.Errorf("phase %s, IP %q", got.Status.Phase, got.Status.PodIP)
		}
		return nil
	})
	return got
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// processWith finds the process whose command line holds every one of args.
func processWith(args ...string) (int, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		cmdline := strings.Split(string(b), "\x00")
		all := true
		for _, a := range args {
			all = all && containsString(cmdline, a)
		}
		if all {
			return strconv.Atoi(filepath.Base(filepath.Dir(f)))
		}
	}
	return 0, fmt.Errorf("no process with %q", args)
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// inCgroup says whether process pid is in the cgroup v2 directory dir.
func inCgroup(pid int, root, dir string) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(root, dir)
	if !strings.Contains(string(b), "0::/"+rel+"\n") {
		return fmt.Errorf("process %d is in\n%s\nnot in %s", pid, b, dir)
	}
	return nil
}

// A lab without kube-proxy and with the bridge CNI: the machines, the outside
// client, the per-node cgroups, and not a trace of kube-proxy on any node.
func TestPrivilegedLab(t *testing.T) {
	l := upTestLab(t, func(o *plan.Options) { o.KubeProxy = "none" })
	p := l.p

	t.Run("outside client", func(t *testing.T) {
		out, err := l.labCmd(t, "exec", "outside", "--", "ip", "-br", "-4", "addr", "show", "eth0")
		if err != nil || !strings.Contains(out, p.Outside.IP.String()+"/24") {
			t.Fatalf("cilium-lab exec outside: %v\n%s", err, out)
		}
		ln, err := netns.Listen(p.Outside.Netns, "tcp", net.JoinHostPort(p.Outside.IP.String(), "7002"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		for _, n := range p.Nodes {
			out, err := l.labCmd(t, "exec", n.Name, "--", filepath.Join(l.binDir, "agnhost"), "connect",
				"--timeout=2s", net.JoinHostPort(p.Outside.IP.String(), "7002"))
			if err != nil {
				t.Errorf("%s cannot reach the outside client: %v\n%s", n.Name, err, out)
			}
		}
		// A Service address nobody load-balances is routed, not unreachable.
		out, _ = l.labCmd(t, "exec", p.Nodes[0].Name, "--", filepath.Join(l.binDir, "agnhost"), "connect",
			"--timeout=1s", net.JoinHostPort(p.ClusterDNS.String(), "53"))
		if strings.Contains(out, "network is unreachable") {
			t.Errorf("connect to a Service address from a node: %s", out)
		}
	})

	t.Run("no kube-proxy", func(t *testing.T) {
		for _, n := range p.Nodes {
			if _, err := processWith("--config=" + kubeProxyConfigPath(n)); err == nil {
				t.Errorf("kube-proxy runs on %s", n.Name)
			}
			for _, dump := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
				if _, err := exec.LookPath(dump[0]); err != nil {
					continue
				}
				out, err := l.labCmd(t, append([]string{"exec", n.Name, "--"}, dump...)...)
				if err != nil {
					t.Errorf("%s on %s: %v\n%s", dump, n.Name, err, out)
				}
				if strings.Contains(out, "KUBE-") || strings.Contains(out, "kube-proxy") {
					t.Errorf("%s on %s shows kube-proxy's rules:\n%s", dump, n.Name, out)
				}
			}
		}
	})

	t.Run("node cgroups", func(t *testing.T) {
		root := filepath.Dir(p.Cgroup)
		n := p.Nodes[0]
		agent, err := processWith("node-agent", "--node="+n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := inCgroup(agent, root, n.Cgroup); err != nil {
			t.Errorf("node agent: %v", err)
		}
		l.runPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "cgroup-probe"},
			Spec: corev1.PodSpec{
				NodeName: n.Name,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
					Args: []string{"netexec", "--http-port=8123", "--udp-port=-1"}}},
			},
		})
		pod, err := processWith("netexec", "--http-port=8123")
		if err != nil {
			t.Fatal(err)
		}
		if err := inCgroup(pod, root, n.Cgroup); err != nil {
			t.Errorf("pod: %v", err)
		}
		if other := p.Nodes[1]; inCgroup(pod, root, other.Cgroup) == nil {
			t.Errorf("pod of %s in %s's cgroup", n.Name, other.Name)
		}
	})

	t.Run("API server pod proxy", func(t *testing.T) {
		// The control plane reaches pods on every node, as kubectl's
		// /api/v1/namespaces/NS/pods/NAME:PORT/proxy/ needs.
		for i, n := range p.Nodes {
			name := fmt.Sprintf("proxied-%d", i+1)
			l.runPod(t, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{
					NodeName: n.Name,
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
						Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"}}},
				},
			})
			eventually(t, 30*time.Second, "pod proxy to "+name, func() error {
				body, err := l.cs.CoreV1().RESTClient().Get().
					AbsPath("/api/v1/namespaces/default/pods/" + name + ":8080/proxy/hostname").
					Timeout(5 * time.Second).DoRaw(t.Context())
				if err != nil {
					return err
				}
				if string(body) != name {
					return fmt.Errorf("answered %q", body)
				}
				return nil
			})
		}
	})
}
