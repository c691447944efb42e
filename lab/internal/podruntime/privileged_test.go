package podruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium-go/cilium/lab/internal/images"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	utilexec "k8s.io/utils/exec"
)

// TestMain lets the test binary be the sandbox binary: the runtime starts
// "<test binary> pod-init SPEC".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "pod-init" {
		os.Exit(SandboxMain(os.Args[2:]))
	}
	if len(os.Args) == 4 && os.Args[1] == "agent-for-test" {
		os.Exit(agentForTest(os.Args[2], os.Args[3]))
	}
	os.Exit(m.Run())
}

const nsMarker = "PODRUNTIME_TEST_IN_NS"

// inTestNamespaces re-runs the calling test in fresh network and mount namespaces
// (the test's "node"), so every interface, address and mount it makes vanishes with
// it. It returns true in the re-executed process, where the test body runs.
func inTestNamespaces(t *testing.T) bool {
	t.Helper()
	if os.Getenv(nsMarker) == "1" {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates namespaces, mounts and veth pairs")
	}
	for _, tool := range []string{"unshare", "/usr/bin/nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs util-linux %s", tool)
		}
	}
	cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "slave", "--",
		os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), nsMarker+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in namespaces:\n%s", out)
	if err != nil {
		t.Fatalf("re-executed test: %v", err)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skip("skipped in namespaces")
	}
	return false
}

// agnhostDir returns the directory holding a built agnhost, or skips.
func agnhostDir(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("LAB_AGNHOST"), "../../../bin/agnhost"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if abs, err := filepath.Abs(c); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return filepath.Dir(abs)
			}
		}
	}
	t.Skip("agnhost not built: run `make build-k8s` or set LAB_AGNHOST")
	return ""
}

// vethNetwork is a real pod network for tests: a veth pair per pod, the node end in
// the test's network namespace, the pod end as eth0 with a /24 and a default route.
type vethNetwork struct {
	mu   sync.Mutex
	next int
	adds int
}

func (n *vethNetwork) Add(ctx context.Context, pod *corev1.Pod, id, netnsPath string) ([]netip.Addr, error) {
	n.mu.Lock()
	n.next++
	subnet := n.next
	n.adds++
	hostName := "lp" + id[:8]
	n.mu.Unlock()

	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName}, PeerName: "c" + id[:8]}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("add veth: %w", err)
	}
	host, err := netlink.LinkByName(hostName)
	if err != nil {
		return nil, err
	}
	nodeAddr, _ := netlink.ParseAddr(fmt.Sprintf("10.123.%d.1/24", subnet))
	if err := netlink.AddrAdd(host, nodeAddr); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, err
	}
	peer, err := netlink.LinkByName("c" + id[:8])
	if err != nil {
		return nil, err
	}
	ns, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if err := netlink.LinkSetNsFd(peer, int(ns)); err != nil {
		return nil, fmt.Errorf("move veth: %w", err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	inPod, err := h.LinkByName("c" + id[:8])
	if err != nil {
		return nil, err
	}
	if err := h.LinkSetName(inPod, "eth0"); err != nil {
		return nil, err
	}
	podIP := netip.MustParseAddr(fmt.Sprintf("10.123.%d.2", subnet))
	podAddr, _ := netlink.ParseAddr(podIP.String() + "/24")
	if err := h.AddrAdd(inPod, podAddr); err != nil {
		return nil, err
	}
	if err := h.LinkSetUp(inPod); err != nil {
		return nil, err
	}
	gw := netip.MustParseAddr(fmt.Sprintf("10.123.%d.1", subnet))
	if err := h.RouteAdd(&netlink.Route{LinkIndex: inPod.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
		return nil, fmt.Errorf("default route: %w", err)
	}
	return []netip.Addr{podIP}, nil
}

func (n *vethNetwork) Del(ctx context.Context, pod *corev1.Pod, id, netnsPath string) error {
	if len(id) < 8 {
		return nil
	}
	link, err := netlink.LinkByName("lp" + id[:8])
	if err != nil {
		return nil // gone with the pod's namespace
	}
	return netlink.LinkDel(link)
}

type testEnv struct {
	rt      *Runtime
	client  *fake.Clientset
	net     *vethNetwork
	podsDir string
	tokens  []*authv1.TokenRequest
	mu      sync.Mutex
}

func newTestEnv(t *testing.T, objs ...runtime.Object) *testEnv {
	t.Helper()
	binDir := agnhostDir(t)
	env := &testEnv{client: fake.NewClientset(objs...), net: &vethNetwork{}, podsDir: t.TempDir()}
	env.client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		req := ca.GetObject().(*authv1.TokenRequest).DeepCopy()
		env.mu.Lock()
		env.tokens = append(env.tokens, req)
		env.mu.Unlock()
		req.Status.Token = "token-for-" + req.Spec.BoundObjectRef.Name
		req.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
		return true, req, nil
	})
	env.rt = env.newRuntime(t, binDir)
	t.Cleanup(func() {
		pods, _ := env.rt.GetPods(context.Background())
		for _, p := range pods {
			env.rt.DeletePod(context.Background(), p)
		}
	})
	return env
}

func (env *testEnv) newRuntime(t *testing.T, binDir string) *Runtime {
	t.Helper()
	rt, err := New(Config{
		NodeName:       "lab-node1",
		NodeIP:         netip.MustParseAddr("172.30.0.11"),
		PodsDir:        env.podsDir,
		SandboxBinary:  os.Args[0],
		Images:         images.New(binDir),
		Network:        env.net,
		ClusterDNS:     netip.MustParseAddr("10.96.0.10"),
		ClusterDomain:  "cluster.local",
		Client:         env.client,
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		MaxGracePeriod: 3 * time.Second,
		BackoffInitial: 100 * time.Millisecond,
		BackoffMax:     time.Second,
		VolumeRefresh:  200 * time.Millisecond,
		StorageCheck:   200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

const agnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.53"

func newPod(name string, tweak func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			NodeName:                      "lab-node1",
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(2)),
		},
	}
	tweak(pod)
	return pod
}

// waitPod polls the runtime until cond holds for the pod's current state.
func waitPod(t *testing.T, rt *Runtime, pod *corev1.Pod, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last *corev1.Pod
	for time.Now().Before(deadline) {
		p, err := rt.GetPod(context.Background(), pod.Namespace, pod.Name)
		if err == nil {
			last = p
			if cond(p) {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod %s: timed out waiting for %s; last status: %+v", pod.Name, what, last.Status)
	return nil
}

func containerStatus(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, cs := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// execIO is an api.AttachIO over buffers.
type execIO struct {
	stdin          io.Reader
	stdout, stderr bytes.Buffer
	tty            bool
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (e *execIO) Stdin() io.Reader            { return e.stdin }
func (e *execIO) Stdout() io.WriteCloser      { return nopCloser{&e.stdout} }
func (e *execIO) Stderr() io.WriteCloser      { return nopCloser{&e.stderr} }
func (e *execIO) TTY() bool                   { return e.tty }
func (e *execIO) Resize() <-chan api.TermSize { return nil }

func execIn(t *testing.T, rt *Runtime, pod *corev1.Pod, ctr string, cmd ...string) (string, error) {
	t.Helper()
	io := &execIO{}
	err := rt.RunInContainer(context.Background(), pod.Namespace, pod.Name, ctr, cmd, io)
	return io.stdout.String() + io.stderr.String(), err
}

func mustExec(t *testing.T, rt *Runtime, pod *corev1.Pod, ctr string, cmd ...string) string {
	t.Helper()
	out, err := execIn(t, rt, pod, ctr, cmd...)
	if err != nil {
		t.Fatalf("exec %q in %s: %v\n%s", cmd, ctr, err, out)
	}
	return out
}

func readLogs(t *testing.T, rt *Runtime, pod *corev1.Pod, ctr string, opts api.ContainerLogOpts) string {
	t.Helper()
	r, err := rt.GetContainerLogs(context.Background(), pod.Namespace, pod.Name, ctr, opts)
	if err != nil {
		t.Fatalf("logs of %s: %v", ctr, err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

func exitCode(err error) int {
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}
