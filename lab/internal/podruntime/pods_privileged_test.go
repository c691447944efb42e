package podruntime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/cilium-go/cilium/lab/internal/images"
	"io"
	"k8s.io/client-go/kubernetes/fake"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func httpGet(url string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// netexecPod: an agnhost netexec server with an HTTP readiness probe, a shell
// sidecar, a shared emptyDir, a configMap volume and a projected service-account
// volume like the one admission adds.
func netexecPod() *corev1.Pod {
	return newPod("web", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{
			{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
			{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr(int32(0o644)),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
			}}},
		}
		saMount := corev1.VolumeMount{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}
		p.Spec.Containers = []corev1.Container{
			{
				Name: "server", Image: agnhostImage,
				// The server starts late so the readiness probe first fails.
				Command: []string{"sh", "-c", "sleep 1; exec /agnhost netexec --http-port=8080 --udp-port=-1"},
				Env:     []corev1.EnvVar{{Name: "MY_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/hostname", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}, {Name: "cfg", MountPath: "/etc/web"}, saMount},
			},
			{
				Name: "sidecar", Image: "busybox:1.36",
				Command:      []string{"sh", "-c", "echo from-sidecar > /scratch/note; echo sidecar up; exec sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/scratch"}, saMount},
			},
		}
	})
}

func TestPrivilegedPodServesAndExecs(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "default"}, Data: map[string]string{"greeting": "hello lab"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default"}, Data: map[string]string{"ca.crt": "CA PEM"}},
	)
	rt := env.rt
	pod := netexecPod()
	if err := rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}

	// The probe fails until the server listens, then Ready flips to true.
	sawNotReady := false
	p := waitPod(t, rt, pod, "Ready", func(p *corev1.Pod) bool {
		if containerStatus(p, "server").State.Running != nil && !podReady(p) {
			sawNotReady = true
		}
		return podReady(p)
	})
	if !sawNotReady {
		t.Error("never saw the pod running but not ready")
	}
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !strings.HasPrefix(p.Status.PodIP, "10.123.") {
		t.Fatalf("phase %s, pod IP %q", p.Status.Phase, p.Status.PodIP)
	}
	ip := p.Status.PodIP

	// The server answers from the node's network namespace.
	if body, err := httpGet("http://" + ip + ":8080/hostname"); err != nil || body != "web" {
		t.Fatalf("GET /hostname = %q, %v", body, err)
	}
	// Both containers share the network, UTS and /etc/hosts.
	for _, c := range []string{"server", "sidecar"} {
		if got := strings.TrimSpace(mustExec(t, rt, pod, c, "hostname")); got != "web" {
			t.Errorf("%s: hostname %q", c, got)
		}
		if hosts := mustExec(t, rt, pod, c, "cat", "/etc/hosts"); !strings.Contains(hosts, ip+"\tweb") {
			t.Errorf("%s: /etc/hosts lacks the pod IP:\n%s", c, hosts)
		}
		if out := mustExec(t, rt, pod, c, "sh", "-c", "wget -q -O - http://127.0.0.1:8080/hostname 2>/dev/null || /agnhost connect 127.0.0.1:8080 && echo connected"); !strings.Contains(out, "web") && !strings.Contains(out, "connected") {
			t.Errorf("%s: localhost:8080 unreachable: %q", c, out)
		}
	}
	if got := mustExec(t, rt, pod, "server", "cat", "/etc/resolv.conf"); !strings.Contains(got, "nameserver 10.96.0.10") ||
		!strings.Contains(got, "search default.svc.cluster.local") {
		t.Errorf("resolv.conf:\n%s", got)
	}
	mustExec(t, rt, pod, "server", "test", "-x", "/agnhost")
	if got := mustExec(t, rt, pod, "server", "sh", "-c", "echo $MY_IP $HOSTNAME $KUBERNETES_SERVICE_HOST"); strings.TrimSpace(got) != ip+" web" {
		t.Errorf("env: %q", got)
	}

	// Exit codes and stdin reach the caller.
	if _, err := execIn(t, rt, pod, "server", "sh", "-c", "exit 3"); exitCode(err) != 3 {
		t.Errorf("exit 3: err %v", err)
	}
	in := &execIO{stdin: strings.NewReader("piped\n")}
	if err := rt.RunInContainer(context.Background(), "default", "web", "sidecar", []string{"cat"}, in); err != nil || in.stdout.String() != "piped\n" {
		t.Errorf("stdin: %q %v", in.stdout.String(), err)
	}
	tty := &execIO{tty: true}
	if err := rt.RunInContainer(context.Background(), "default", "web", "sidecar", []string{"tty"}, tty); err != nil || !strings.Contains(tty.stdout.String(), "/dev/pts/") {
		t.Errorf("tty: %q %v", tty.stdout.String(), err)
	}

	// Volumes: the emptyDir is shared, the configMap and projected files are there,
	// and the token was requested for this pod.
	if got := mustExec(t, rt, pod, "server", "cat", "/shared/note"); got != "from-sidecar\n" {
		t.Errorf("emptyDir: %q", got)
	}
	if got := mustExec(t, rt, pod, "server", "cat", "/etc/web/greeting"); got != "hello lab" {
		t.Errorf("configMap: %q", got)
	}
	sa := "/var/run/secrets/kubernetes.io/serviceaccount/"
	if got := mustExec(t, rt, pod, "sidecar", "cat", sa+"token", sa+"ca.crt", sa+"namespace"); got != "token-for-webCA PEMdefault" {
		t.Errorf("projected: %q", got)
	}
	if _, err := execIn(t, rt, pod, "server", "touch", "/etc/web/x"); err == nil {
		t.Error("configMap volume is writable")
	}
	// A configMap change reaches the running pod.
	cm, _ := env.client.CoreV1().ConfigMaps("default").Get(context.Background(), "web-config", metav1.GetOptions{})
	cm.Data["greeting"] = "changed"
	env.client.CoreV1().ConfigMaps("default").Update(context.Background(), cm, metav1.UpdateOptions{})
	deadline := time.Now().Add(10 * time.Second)
	for mustExec(t, rt, pod, "server", "cat", "/etc/web/greeting") != "changed" {
		if time.Now().After(deadline) {
			t.Fatal("configMap update not projected")
		}
		time.Sleep(100 * time.Millisecond)
	}
	env.mu.Lock()
	if len(env.tokens) == 0 || env.tokens[0].Spec.BoundObjectRef.UID != pod.UID {
		t.Errorf("token requests: %+v", env.tokens)
	}
	env.mu.Unlock()

	// Nothing the pod mounted shows on the node.
	if m, _ := mountsUnder(env.podsDir); len(m) != 1 || !strings.HasSuffix(m[0], "/netns") {
		t.Errorf("node mounts under the pods dir: %v", m)
	}

	// Port-forward reaches the server through the pod's loopback.
	client, server := net.Pipe()
	fwdDone := make(chan error, 1)
	go func() { fwdDone <- rt.PortForward(context.Background(), "default", "web", 8080, server) }()
	io.WriteString(client, "GET /hostname HTTP/1.0\r\n\r\n")
	resp, _ := io.ReadAll(client)
	client.Close()
	if err := <-fwdDone; err != nil || !strings.HasSuffix(string(resp), "\r\n\r\nweb") {
		t.Errorf("port-forward: %q %v", resp, err)
	}

	// Logs carry the server's output.
	if logs := readLogs(t, rt, pod, "server", api.ContainerLogOpts{}); !strings.Contains(logs, "Started HTTP server on port 8080") {
		t.Errorf("server logs:\n%s", logs)
	}
	if logs := readLogs(t, rt, pod, "sidecar", api.ContainerLogOpts{Timestamps: true}); !strings.Contains(logs, "Z sidecar up\n") {
		t.Errorf("sidecar logs: %q", logs)
	}

	// /exit kills the server: not ready, restarted (policy Always), ready again.
	httpGet("http://" + ip + ":8080/exit?code=4")
	waitPod(t, rt, pod, "restart", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "server")
		return cs.RestartCount == 1 && cs.LastTerminationState.Terminated != nil && podReady(p)
	})
	p, _ = rt.GetPod(context.Background(), "default", "web")
	if code := containerStatus(p, "server").LastTerminationState.Terminated.ExitCode; code != 4 {
		t.Errorf("last exit code %d, want 4", code)
	}
	if logs := readLogs(t, rt, pod, "server", api.ContainerLogOpts{Previous: true}); !strings.Contains(logs, "Started HTTP server") {
		t.Errorf("previous logs: %q", logs)
	}
}

func TestPrivilegedRestartPolicies(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	rt := env.rt
	shell := func(name string, policy corev1.RestartPolicy, script string) *corev1.Pod {
		return newPod(name, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = policy
			p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", script}}}
		})
	}
	always := shell("always", corev1.RestartPolicyAlways, "echo run; exit 1")
	never := shell("never", corev1.RestartPolicyNever, "echo bye > /dev/termination-log; exit 2")
	onFailure := shell("ordered", corev1.RestartPolicyOnFailure, "cat /work/order")
	onFailure.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
	mount := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	onFailure.Spec.Containers[0].VolumeMounts = mount
	onFailure.Spec.InitContainers = []corev1.Container{
		{Name: "first", Image: "busybox", Command: []string{"sh", "-c", "sleep 0.3; echo a >> /work/order"}, VolumeMounts: mount},
		{Name: "second", Image: "busybox", Command: []string{"sh", "-c", "echo b >> /work/order"}, VolumeMounts: mount},
	}
	deadline := shell("deadline", corev1.RestartPolicyAlways, "exec sleep 3600")
	deadline.Spec.ActiveDeadlineSeconds = ptr(int64(1))
	unknown := newPod("unknown", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "main", Image: "quay.io/nobody/nothing:v1"}}
	})
	for _, p := range []*corev1.Pod{always, never, onFailure, unknown, deadline} {
		if err := rt.CreatePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}

	p := waitPod(t, rt, always, "two restarts", func(p *corev1.Pod) bool { return containerStatus(p, "main").RestartCount >= 2 })
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("always: phase %s", p.Status.Phase)
	}
	if lt := containerStatus(p, "main").LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 || lt.Reason != "Error" {
		t.Errorf("always: last state %+v", lt)
	}

	p = waitPod(t, rt, never, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	cs := containerStatus(p, "main")
	if cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 2 {
		t.Errorf("never: %+v", cs)
	}
	if msg := cs.State.Terminated.Message; msg != "bye\n" {
		t.Errorf("termination message %q", msg)
	}
	if _, err := os.Stat("/dev/termination-log"); err == nil {
		t.Error("the container wrote into the host's /dev")
	}

	p = waitPod(t, rt, onFailure, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if logs := readLogs(t, rt, onFailure, "main", api.ContainerLogOpts{}); logs != "a\nb\n" {
		t.Errorf("init containers ran out of order: %q", logs)
	}
	for _, name := range []string{"first", "second"} {
		if st := containerStatus(p, name).State.Terminated; st == nil || st.Reason != "Completed" {
			t.Errorf("init %s: %+v", name, st)
		}
	}

	p = waitPod(t, rt, deadline, "DeadlineExceeded", func(p *corev1.Pod) bool { return p.Status.Reason == "DeadlineExceeded" })
	if p.Status.Phase != corev1.PodFailed {
		t.Errorf("deadline: phase %s", p.Status.Phase)
	}
	waitPod(t, rt, deadline, "its container stopped", func(p *corev1.Pod) bool {
		return containerStatus(p, "main").State.Terminated != nil
	})

	p = waitPod(t, rt, unknown, "ErrImagePull", func(p *corev1.Pod) bool {
		w := containerStatus(p, "main").State.Waiting
		return w != nil && w.Reason == "ErrImagePull"
	})
	if msg := containerStatus(p, "main").State.Waiting.Message; !strings.Contains(msg, "quay.io/nobody/nothing:v1") {
		t.Errorf("ErrImagePull message %q does not name the image", msg)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("unknown image: phase %s", p.Status.Phase)
	}
	// And a Warning event, as the kubelet records one, names it too.
	events, err := env.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events.Items {
		found = found || ev.InvolvedObject.Name == unknown.Name && ev.Type == corev1.EventTypeWarning && ev.Reason == "Failed" &&
			ev.InvolvedObject.FieldPath == "spec.containers{main}" && strings.Contains(ev.Message, `Failed to pull image "quay.io/nobody/nothing:v1"`)
	}
	if !found {
		t.Errorf("no Failed event names the unknown image: %+v", events.Items)
	}
}

func TestPrivilegedHostNetwork(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	pod := newPod("hostnet", func(p *corev1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}}
	})
	if err := env.rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, env.rt, pod, "Running", func(p *corev1.Pod) bool { return podReady(p) })
	if p.Status.PodIP != "172.30.0.11" {
		t.Errorf("pod IP %q, want the node IP", p.Status.PodIP)
	}
	nodeHost, _ := os.Hostname()
	if got := strings.TrimSpace(mustExec(t, env.rt, pod, "main", "hostname")); got != nodeHost {
		t.Errorf("hostname %q, want the node's %q", got, nodeHost)
	}
	// Same network namespace as the node: the same interfaces.
	if got, want := mustExec(t, env.rt, pod, "main", "readlink", "/proc/self/ns/net"), readlink(t, "/proc/self/ns/net"); strings.TrimSpace(got) != want {
		t.Errorf("netns %q, want the node's %q", got, want)
	}
	if env.net.adds != 0 {
		t.Errorf("Network.Add called %d times for a host-network pod", env.net.adds)
	}
}

// TestPrivilegedPortForwardLoopback: port-forward dials localhost inside the
// pod's network namespace, as containerd does, so it reaches a server bound
// to the pod's 127.0.0.1 alone, which the node cannot; a host-network pod's
// is the node's.
func TestPrivilegedPortForwardLoopback(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(lo); err != nil { // the test's node namespace starts with lo down
		t.Fatal(err)
	}
	env := newTestEnv(t)
	serving := func(name, reply string, hostNetwork bool) *corev1.Pod {
		return newPod(name, func(p *corev1.Pod) {
			p.Spec.HostNetwork = hostNetwork
			p.Spec.Containers = []corev1.Container{{Name: "socat", Image: socatImage,
				Args: []string{"TCP-LISTEN:7000,bind=127.0.0.1,fork,reuseaddr", "SYSTEM:echo " + reply}}}
		})
	}
	inPod, onNode := serving("loopback", "in-pod", false), serving("hostnet", "on-node", true)
	var podIP string
	for _, p := range []*corev1.Pod{inPod, onNode} {
		if err := env.rt.CreatePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		running := waitPod(t, env.rt, p, "running", func(p *corev1.Pod) bool { return containerStatus(p, "socat").State.Running != nil })
		if p == inPod {
			podIP = running.Status.PodIP
		}
	}
	for _, tc := range []struct{ pod, want string }{{"loopback", "in-pod"}, {"hostnet", "on-node"}} {
		var got string
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got, err = portForward(env.rt, tc.pod, 7000); err == nil {
				break
			}
		}
		if err != nil || strings.TrimSpace(got) != tc.want {
			t.Errorf("port-forward to %s: %q %v, want %q", tc.pod, got, err, tc.want)
		}
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(podIP, "7000"), 2*time.Second); err == nil {
		conn.Close()
		t.Error("the node reached the pod's loopback-only server on its IP")
	}
	if _, err := portForward(env.rt, "loopback", 7001); err == nil {
		t.Error("port-forward to a port nothing listens on succeeded")
	}
}

// portForward forwards a stream to port of pod name and returns what came back.
func portForward(rt *Runtime, name string, port int32) (string, error) {
	client, server := net.Pipe()
	defer client.Close()
	errc := make(chan error, 1)
	go func() {
		errc <- rt.PortForward(context.Background(), "default", name, port, server)
		server.Close()
	}()
	out, _ := io.ReadAll(client)
	return string(out), <-errc
}

func readlink(t *testing.T, p string) string {
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func processGone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return os.IsNotExist(err)
}

func TestPrivilegedDeleteAndRestartCleanup(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "default"}, Data: map[string]string{"greeting": "hi"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default"}, Data: map[string]string{"ca.crt": "CA"}},
	)
	rt := env.rt
	var notified []*corev1.Pod
	notifyCtx, stop := context.WithCancel(context.Background())
	defer stop()
	var nmu sync.Mutex
	rt.NotifyPods(notifyCtx, func(p *corev1.Pod) { nmu.Lock(); notified = append(notified, p); nmu.Unlock() })

	pod := netexecPod()
	if err := rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, rt, pod, "Ready", podReady)
	ps := rt.lookup("default", "web")
	ps.mu.Lock()
	pids := []int{ps.sandbox.pid, ps.containers[0].proc.Pid, ps.containers[1].proc.Pid}
	podDir := ps.dir
	ps.mu.Unlock()

	if err := rt.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("process %d still exists", pid)
		}
	}
	if m, _ := mountsUnder(env.podsDir); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod dir left: %v", err)
	}
	if links, _ := netlink.LinkList(); len(links) != 1 {
		t.Errorf("links left in the node netns: %d", len(links))
	}
	if _, err := rt.GetPod(context.Background(), "default", "web"); err == nil {
		t.Error("pod still known")
	}
	if err := rt.DeletePod(context.Background(), pod); err != nil {
		t.Errorf("second delete: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		nmu.Lock()
		var last *corev1.Pod
		if len(notified) > 0 {
			last = notified[len(notified)-1]
		}
		nmu.Unlock()
		if last != nil && (last.Status.Phase == corev1.PodFailed || last.Status.Phase == corev1.PodSucceeded) {
			for _, cs := range last.Status.ContainerStatuses {
				if cs.State.Terminated == nil {
					t.Errorf("final status: %s not terminated", cs.Name)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no terminal status notified; last %+v", last)
		}
		time.Sleep(20 * time.Millisecond)
	}

}

// TestPrivilegedAgentRestart kills a node agent (a child process running the runtime)
// while its pod runs; the next runtime on the same pods directory removes the pod's
// processes, network attachment, mounts and directory.
func TestPrivilegedAgentRestart(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	binDir := agnhostDir(t)
	podsDir := t.TempDir()
	agent := exec.Command(os.Args[0], "agent-for-test", podsDir, binDir)
	agent.Stderr = testWriter{t}
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "running" {
		agent.Process.Kill()
		agent.Wait()
		t.Fatalf("agent: %q", line)
	}
	agent.Process.Kill()
	agent.Wait()

	entries, _ := os.ReadDir(podsDir)
	if len(entries) != 1 {
		t.Fatalf("pod dirs: %d", len(entries))
	}
	var rec podRecord
	data, _ := os.ReadFile(filepath.Join(podsDir, entries[0].Name(), recordFile))
	if err := json.Unmarshal(data, &rec); err != nil || len(rec.Procs) < 2 || rec.Netns == "" {
		t.Fatalf("record: %s %v", data, err)
	}
	for _, pr := range rec.Procs {
		if processGone(pr.PID) {
			t.Fatalf("process %d died with the agent; nothing to clean up", pr.PID)
		}
	}

	env := &testEnv{client: fake.NewClientset(), net: &vethNetwork{}, podsDir: podsDir}
	env.newRuntime(t, binDir)
	for _, pr := range rec.Procs {
		deadline := time.Now().Add(5 * time.Second)
		for !processGone(pr.PID) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !processGone(pr.PID) {
			t.Errorf("stale process %d survived", pr.PID)
		}
	}
	if m, _ := mountsUnder(podsDir); len(m) != 0 {
		t.Errorf("stale mounts: %v", m)
	}
	if entries, _ := os.ReadDir(podsDir); len(entries) != 0 {
		t.Errorf("stale pod dirs: %d", len(entries))
	}
	if links, _ := netlink.LinkList(); len(links) != 1 {
		t.Errorf("stale links: %d", len(links))
	}
}

// agentForTest is the node agent TestPrivilegedAgentRestart kills: it runs one pod
// and prints "running" once the pod's container runs.
func agentForTest(podsDir, binDir string) int {
	rt, err := New(Config{
		NodeName: "lab-node1", NodeIP: netip.MustParseAddr("172.30.0.11"), PodsDir: podsDir,
		SandboxBinary: os.Args[0], Images: images.New(binDir), Network: &vethNetwork{},
		Client: fake.NewClientset(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pod := newPod("left-behind", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
		p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
			VolumeMounts: []corev1.VolumeMount{{Name: "mem", MountPath: "/mem"}}}}
	})
	if err := rt.CreatePod(context.Background(), pod); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for range 600 {
		p, _ := rt.GetPod(context.Background(), "default", pod.Name)
		if p != nil && podReady(p) {
			fmt.Println("running")
			select {}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "pod never became ready")
	return 1
}

func TestPrivilegedLivenessAndDeleteDuringInit(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	rt := env.rt
	// An exec liveness probe that always fails restarts the container; a startup
	// probe that passes gates it.
	live := newPod("liveness", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{
			Name: "main", Image: "busybox", Command: []string{"sh", "-c", "touch /tmp/started; exec sleep 3600"},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/tmp/started"}}},
				PeriodSeconds: 1, FailureThreshold: 5},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/nonexistent"}}},
				PeriodSeconds: 1, FailureThreshold: 2},
		}}
	})
	stuck := newPod("stuck-init", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "wait", Image: "busybox", Command: []string{"sleep", "3600"}}}
		p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}}
	})
	for _, p := range []*corev1.Pod{live, stuck} {
		if err := rt.CreatePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	sawStarted := false
	p := waitPod(t, rt, live, "a liveness restart", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		sawStarted = sawStarted || (cs.Started != nil && *cs.Started)
		return cs.RestartCount >= 1
	})
	if !sawStarted {
		t.Error("startup probe never marked the container started")
	}
	if lt := containerStatus(p, "main").LastTerminationState.Terminated; lt == nil || lt.ExitCode != 128+15 {
		t.Errorf("liveness kill: last state %+v, want SIGTERM's exit code", lt)
	}

	p = waitPod(t, rt, stuck, "init running", func(p *corev1.Pod) bool {
		return containerStatus(p, "wait").State.Running != nil
	})
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s during init", p.Status.Phase)
	}
	start := time.Now()
	if err := rt.DeletePod(context.Background(), stuck); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("delete during init took %v", d)
	}
	if _, err := rt.GetPod(context.Background(), "default", "stuck-init"); err == nil {
		t.Error("pod still known")
	}
}

// TestPrivilegedCoreDNS runs the CoreDNS image the way the lab's kube-dns
// Deployment does (Corefile from a configMap, health probe) and resolves a name
// through it from the node.
func TestPrivilegedCoreDNS(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	binDir := agnhostDir(t)
	if _, err := os.Stat(filepath.Join(binDir, "coredns")); err != nil {
		t.Skip("coredns not built")
	}
	corefile := ".:53 {\n    health :8080\n    hosts {\n        10.1.2.3 lab.test\n    }\n}\n"
	env := newTestEnv(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "default"},
		Data: map[string]string{"Corefile": corefile}})
	pod := newPod("coredns", func(p *corev1.Pod) {
		p.Spec.DNSPolicy = corev1.DNSDefault
		p.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}}
		p.Spec.Containers = []corev1.Container{{
			Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.12.0",
			Args:         []string{"-conf", "/etc/coredns/Corefile"},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
				PeriodSeconds: 1},
		}}
	})
	if err := env.rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, env.rt, pod, "Ready", podReady)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", net.JoinHostPort(p.Status.PodIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, "lab.test")
	if err != nil || len(addrs) != 1 || addrs[0] != "10.1.2.3" {
		t.Errorf("lookup lab.test via CoreDNS: %v %v", addrs, err)
	}
}

// TestPrivilegedGRPCAndTCPProbes: a gRPC readiness probe follows the server's health
// and a TCP liveness probe keeps a listening container alive.
func TestPrivilegedGRPCAndTCPProbes(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	pod := newPod("grpc", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{
			Name: "health", Image: agnhostImage,
			Args: []string{"grpc-health-checking", "--port=5000", "--http-port=8081"},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 5000}},
				PeriodSeconds: 1, FailureThreshold: 1},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5000)}},
				InitialDelaySeconds: 1, PeriodSeconds: 1, FailureThreshold: 1},
		}}
	})
	if err := env.rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, env.rt, pod, "Ready", podReady)
	if _, err := httpGet("http://" + p.Status.PodIP + ":8081/make-not-serving"); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, env.rt, pod, "not Ready", func(p *corev1.Pod) bool { return !podReady(p) })
	if cs := containerStatus(p, "health"); cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("the TCP liveness probe killed a listening container: %+v", cs)
	}
}

// TestPrivilegedReadinessProbeFlips: a readiness probe that starts failing after it
// passed makes the container unready after failureThreshold failures, and ready
// again after successThreshold successes; the container keeps running throughout.
// Also a probe command that leaves a process behind does not hold up the probe.
func TestPrivilegedReadinessProbeFlips(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	ctx := env.startPodController(t)
	rt := env.rt
	pod := newPod("flip", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{
			Name: "c", Image: agnhostImage,
			Command: []string{"sh", "-c", "touch /tmp/ready; exec /agnhost pause"},
			ReadinessProbe: &corev1.Probe{
				// The probe leaves a child behind holding its output: the probe's
				// result is its command's exit status, whatever outlives it.
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep 120 & cat /tmp/ready"}}},
				PeriodSeconds: 1, FailureThreshold: 2, SuccessThreshold: 2,
			},
		}}
	})
	if _, err := env.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// In the API, where EndpointSlices take readiness from.
	waitAPIPod(t, env, "flip", "Ready", podReady)

	mustExec(t, rt, pod, "c", "rm", "/tmp/ready")
	removed := time.Now()
	p := waitAPIPod(t, env, "flip", "not Ready", func(p *corev1.Pod) bool { return !podReady(p) })
	// Two failures a second apart: not before the second one.
	if d := time.Since(removed); d < time.Second {
		t.Errorf("unready %s after the probe started failing: failureThreshold 2 not honoured", d)
	}
	if cs := containerStatus(p, "c"); cs.Ready || cs.State.Running == nil || cs.RestartCount != 0 {
		t.Errorf("container %+v: want running and unready", cs)
	}
	if c := podCondition(p, corev1.ContainersReady); c.Status != corev1.ConditionFalse {
		t.Errorf("ContainersReady %+v", c)
	}

	mustExec(t, rt, pod, "c", "touch", "/tmp/ready")
	back := time.Now()
	waitAPIPod(t, env, "flip", "Ready again", podReady)
	if d := time.Since(back); d < time.Second {
		t.Errorf("ready %s after the probe passed again: successThreshold 2 not honoured", d)
	}
}

// TestPrivilegedHTTPReadinessFails: an HTTP readiness probe that passed and then
// fails (agnhost netexec's /readyz after SIGTERM, while --delay-shutdown keeps
// the server up) makes the pod unready although the container still runs.
func TestPrivilegedHTTPReadinessFails(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	rt := env.rt
	pod := newPod("readyz", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{
			Name: "c", Image: agnhostImage,
			Args: []string{"netexec", "--http-port=8080", "--udp-port=8081", "--delay-shutdown=30"},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
				PeriodSeconds: 1, FailureThreshold: 1,
			},
		}}
	})
	if err := rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, rt, pod, "Ready", podReady)
	p := rt.lookup("default", "readyz")
	p.mu.Lock()
	proc := p.containers[0].proc
	p.mu.Unlock()
	if err := proc.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, rt, pod, "not Ready", func(p *corev1.Pod) bool { return !podReady(p) })
	if cs := containerStatus(got, "c"); cs.State.Running == nil || cs.Ready {
		t.Errorf("container %+v: want running and unready", cs)
	}
}

// TestPrivilegedAgnhostTools: an agnhost container has the tools the real image
// carries for network tests, from the host's /usr (hack/deps.sh installs them).
func TestPrivilegedAgnhostTools(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	rt := env.rt
	pod := newPod("tools", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: agnhostImage}}
	})
	if err := rt.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, rt, pod, "running", func(p *corev1.Pod) bool { return containerStatus(p, "c").State.Running != nil })
	for _, tc := range []struct {
		argv []string
		want string // in the output
	}{
		{[]string{"sh", "-c", "echo shell"}, "shell"},
		{[]string{"sh", "-c", "nc -h 2>&1; true"}, "OpenBSD netcat"},
		{[]string{"curl", "--version"}, "curl "},
		{[]string{"wget", "--version"}, "GNU Wget"},
		{[]string{"dig", "-v"}, "DiG"},
		{[]string{"sh", "-c", "nslookup -version 2>&1; true"}, "nslookup"},
		{[]string{"ss", "-V"}, "iproute2"},
	} {
		out, err := execIn(t, rt, pod, "c", tc.argv...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%q in an agnhost container: %v\n%s(hack/deps.sh test installs the tools of the agnhost image)", tc.argv, err, out)
		}
	}
}
