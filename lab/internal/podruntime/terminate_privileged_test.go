package podruntime

import (
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"
)

// statusLog records every pod status the node writes to the fake API.
type statusLog struct {
	mu       sync.Mutex
	statuses []timedStatus
}

type timedStatus struct {
	at     time.Time
	status corev1.PodStatus
}

func (l *statusLog) record(env *testEnv) {
	env.client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			pod := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod)
			l.mu.Lock()
			l.statuses = append(l.statuses, timedStatus{time.Now(), *pod.Status.DeepCopy()})
			l.mu.Unlock()
		}
		return false, nil, nil
	})
}

func (l *statusLog) since(t time.Time) []timedStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.statuses, func(s timedStatus) bool { return !s.at.Before(t) })
	if i < 0 {
		return nil
	}
	return slices.Clone(l.statuses[i:])
}

// TestPrivilegedGracefulTermination deletes a pod as the API server does and
// follows it as EndpointSlices would: while its preStop hook runs the pod still
// serves and is Ready (serving, terminating); after SIGTERM its readiness probe
// fails while the server drains (not serving, terminating); a container that
// ignores SIGTERM is killed at the end of the grace period. An httpGet preStop
// hook reaches its target before that container is signalled.
func TestPrivilegedGracefulTermination(t *testing.T) {
	if !inTestNamespaces(t) {
		return
	}
	env := newTestEnv(t)
	env.rt.cfg.MaxGracePeriod = time.Minute
	var log statusLog
	log.record(env)
	ctx := env.startPodController(t)

	// The httpGet hook's target, on the node (this test's network namespace).
	if lo, err := netlink.LinkByName("lo"); err != nil || netlink.LinkSetUp(lo) != nil {
		t.Fatalf("loopback: %v", err)
	}
	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hookLn.Close()
	hookHit := make(chan time.Time, 1)
	go http.Serve(hookLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/prestop" {
			select {
			case hookHit <- time.Now():
			default:
			}
		}
	}))
	hookPort := hookLn.Addr().(*net.TCPAddr).Port

	const grace = 8
	pod := newPod("term", func(p *corev1.Pod) {
		p.UID = "uid-term"
		p.Spec.TerminationGracePeriodSeconds = ptr(int64(grace))
		p.Spec.Containers = []corev1.Container{
			{
				Name: "server", Image: agnhostImage,
				// /readyz fails from SIGTERM on; the server stays up 2s more.
				Args: []string{"netexec", "--http-port=8080", "--udp-port=8081", "--delay-shutdown=2"},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
					Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep 3"}},
				}},
			},
			{
				Name: "stubborn", Image: agnhostImage,
				// Ignores SIGTERM (and so does the exec'd sleep): only SIGKILL ends it.
				Command: []string{"sh", "-c", "trap '' TERM; exec sleep 1000"},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
					HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(hookPort)), Path: "/prestop"},
				}},
			},
		}
	})
	if _, err := env.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitAPIPod(t, env, "term", "Ready", podReady)
	ip := got.Status.PodIP

	// A graceful delete, as the API server makes it.
	now := metav1.Now()
	got.DeletionTimestamp, got.DeletionGracePeriodSeconds = &now, ptr(int64(grace))
	deleted := time.Now()
	if _, err := env.client.CoreV1().Pods("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The preStop hook runs 3s: meanwhile the server answers and the pod stays Ready.
	select {
	case at := <-hookHit:
		t.Logf("httpGet preStop hook after %s", at.Sub(deleted).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the httpGet preStop hook never came")
	}
	time.Sleep(1500 * time.Millisecond) // well inside the exec hook's 3s
	if body, err := httpGet("http://" + ip + ":8080/hostname"); err != nil || body != "term" {
		t.Errorf("during preStop, GET /hostname = %q, %v: the pod must still serve", body, err)
	}
	if p, _ := env.rt.GetPod(ctx, "default", "term"); p == nil || !podReady(p) {
		t.Error("during preStop, the pod is not Ready: a terminating pod is Ready while its readiness probe passes")
	}

	// Then SIGTERM: the readiness probe fails while the server still runs.
	unready := waitAPIPod(t, env, "term", "not Ready while terminating", func(p *corev1.Pod) bool { return !podReady(p) })
	if cs := containerStatus(unready, "server"); cs.State.Running == nil {
		t.Errorf("server %+v: want still running, draining", cs.State)
	}
	if d := time.Since(deleted); d < 3*time.Second {
		t.Errorf("not Ready %s after the delete: before the 3s preStop hook ended", d)
	}

	// The pod goes away once the stubborn container is killed at the end of the grace period.
	waitGone := time.Now().Add(30 * time.Second)
	for {
		if pods, _ := env.rt.GetPods(ctx); len(pods) == 0 {
			break
		}
		if time.Now().After(waitGone) {
			t.Fatal("the pod never stopped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var server, stubborn *corev1.ContainerStateTerminated
	for _, s := range log.since(deleted) {
		for _, cs := range s.status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && cs.Name == "server" && server == nil {
				server = term
			}
			if term := cs.State.Terminated; term != nil && cs.Name == "stubborn" && stubborn == nil {
				stubborn = term
			}
		}
	}
	if server == nil || server.ExitCode != 0 {
		t.Errorf("server terminated %+v: want a clean exit after SIGTERM", server)
	}
	if stubborn == nil || stubborn.ExitCode != 137 {
		t.Fatalf("stubborn terminated %+v: want SIGKILL (137)", stubborn)
	}
	if d := stubborn.FinishedAt.Sub(deleted); d < (grace-1)*time.Second {
		t.Errorf("stubborn killed %s after the delete: before the %ds grace period ended", d, grace)
	}
}
