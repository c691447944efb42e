package podruntime

import (
	"context"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(env.client, 0)
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         env.client.CoreV1(),
		PodInformer:       factory.Core().V1().Pods(),
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
