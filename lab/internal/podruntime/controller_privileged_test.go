package podruntime

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"
)

// TestPrivilegedWithPodController drives the runtime through virtual-kubelet's pod
// controller against a fake API server: the pod's status (IP, phase, readiness)
// lands in the API, the status.podIP env var is filled, and deleting the pod in
// the API stops it on the node.
func TestPrivilegedWithPodController(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	ctx := env.startPodController(t)

	pod := newPod("api-pod", func(p *corev1.Pod) {
		p.UID = ""
		p.Spec.Containers = []corev1.Container{{
			Name: "server", Image: agnhostImage,
			Command: []string{"sh", "-c", "echo ip=$POD_IP; exec /agnhost netexec --http-port=8080 --udp-port=-1"},
			Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
		}}
	})
	pod.UID = "uid-api-pod"
	if _, err := env.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err = env.client.CoreV1().Pods("default").Get(ctx, "api-pod", metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" && podReady(got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("API pod status never Running and Ready: %+v", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Without a readiness probe the pod is Ready once it runs, before the server
	// listens, as with the kubelet.
	for {
		body, err := httpGet("http://" + got.Status.PodIP + ":8080/hostname")
		if err == nil && body == "api-pod" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /hostname = %q, %v", body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if logs := readLogs(t, env.rt, pod, "server", api.ContainerLogOpts{}); !strings.Contains(logs, "ip="+got.Status.PodIP+"\n") {
		t.Errorf("status.podIP env not filled: %q", logs)
	}

	// A graceful delete as the API server does it: deletionTimestamp set first. The
	// pod controller stops the pod in the runtime, then removes the API object.
	got, _ = env.client.CoreV1().Pods("default").Get(ctx, "api-pod", metav1.GetOptions{})
	now := metav1.Now()
	// A long grace period: the pod stops at once, and the runtime removes the API
	// object then rather than when the grace period ends.
	got.DeletionTimestamp, got.DeletionGracePeriodSeconds = &now, ptr(int64(30))
	if _, err := env.client.CoreV1().Pods("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		pods, _ := env.rt.GetPods(ctx)
		_, err := env.client.CoreV1().Pods("default").Get(ctx, "api-pod", metav1.GetOptions{})
		if len(pods) == 0 && apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted pod: runtime has %d pods, API get: %v", len(pods), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m, _ := mountsUnder(env.podsDir); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
}

// startPodController runs virtual-kubelet's pod controller over the runtime and
// the fake API, wired as the node agent wires it; it stops when the test ends.
func (env *testEnv) startPodController(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(env.client, 0)
	pods := factory.Core().V1().Pods()
	if err := env.rt.WatchAPIPods(pods); err != nil {
		t.Fatal(err)
	}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         PreserveForeignConditions(env.client.CoreV1()),
		PodInformer:       pods,
		EventRecorder:     record.NewFakeRecorder(1000),
		Provider:          env.rt,
		ConfigMapInformer: factory.Core().V1().ConfigMaps(),
		SecretInformer:    factory.Core().V1().Secrets(),
		ServiceInformer:   factory.Core().V1().Services(),
		// The runtime resolves env itself: VK's resolver cannot answer status.podIP.
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go pc.Run(ctx, 2)
	select {
	case <-pc.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("pod controller not ready")
	}
	return ctx
}

// waitAPIPod polls the fake API server until cond holds for the pod there.
func waitAPIPod(t *testing.T, env *testEnv, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var got *corev1.Pod
	for {
		p, err := env.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			got = p
			if cond(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s in the API: timed out waiting for %s; status %+v", name, what, got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

// TestPrivilegedReadinessGates: a pod whose readiness gate is not True is not
// Ready although its containers are; it turns Ready when someone else sets the
// gate's condition, and back when they clear it. The node's status writes keep
// that condition.
func TestPrivilegedReadinessGates(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	ctx := env.startPodController(t)
	const gate = corev1.PodConditionType("example.com/lb-ready")
	pod := newPod("gated", func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: agnhostImage, Args: []string{"pause"}}}
	})
	if _, err := env.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitAPIPod(t, env, "gated", "containers ready", func(p *corev1.Pod) bool {
		return podCondition(p, corev1.ContainersReady).Status == corev1.ConditionTrue
	})
	if r := podCondition(got, corev1.PodReady); r.Status != corev1.ConditionFalse || r.Reason != "ReadinessGatesNotReady" ||
		!strings.Contains(r.Message, `"example.com/lb-ready" does not exist`) {
		t.Errorf("Ready with the gate's condition missing: %+v", r)
	}
	if !containerStatus(got, "c").Ready {
		t.Error("the container is not ready: gates are the pod's, not the containers'")
	}

	// Another controller sets the gate through the status subresource.
	setGate := func(status corev1.ConditionStatus) {
		t.Helper()
		p, err := env.client.CoreV1().Pods("default").Get(ctx, "gated", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == gate })
		c := corev1.PodCondition{Type: gate, Status: status, LastTransitionTime: metav1.Now()}
		if i < 0 {
			p.Status.Conditions = append(p.Status.Conditions, c)
		} else {
			p.Status.Conditions[i] = c
		}
		if _, err := env.client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setGate(corev1.ConditionFalse)
	waitAPIPod(t, env, "gated", "the gate's status in Ready's message", func(p *corev1.Pod) bool {
		return strings.Contains(podCondition(p, corev1.PodReady).Message, `is not "True", but False`)
	})
	setGate(corev1.ConditionTrue)
	// Ready is the node's write: the gate must have survived it.
	got = waitAPIPod(t, env, "gated", "Ready", func(p *corev1.Pod) bool { return podReady(p) })
	if podCondition(got, gate).Status != corev1.ConditionTrue {
		t.Fatalf("the node's status write dropped the gate's condition: %+v", got.Status.Conditions)
	}
	if p, _ := env.rt.GetPod(ctx, "default", "gated"); !podReady(p) || podCondition(p, gate).Status != corev1.ConditionTrue {
		t.Errorf("the runtime's own view: %+v", p.Status.Conditions)
	}
	setGate(corev1.ConditionFalse)
	got = waitAPIPod(t, env, "gated", "not Ready again", func(p *corev1.Pod) bool { return !podReady(p) })
	if podCondition(got, corev1.ContainersReady).Status != corev1.ConditionTrue {
		t.Errorf("ContainersReady follows the gates: %+v", got.Status.Conditions)
	}
}
