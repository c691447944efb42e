package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// Of two Services claiming one frontend the older gets it: the load
// balancer reads the age and UID of the Service, and of the pod of a
// HostPort service.
func TestServiceAge(t *testing.T) {
	created := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	svc := agent.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-1",
		CreationTimestamp: created}})
	if !svc.CreationTime.Equal(created.Time) || svc.UID != "u-1" {
		t.Fatalf("Service: created %v, UID %q", svc.CreationTime, svc.UID)
	}
	pod := k8stest.Pod("ns", "p", ports(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}), func(p *corev1.Pod) {
		p.UID, p.CreationTimestamp = "u-2", created
	})
	hp, _, ok := agent.HostPortService(pod, pod.Spec.NodeName)
	if !ok || !hp.CreationTime.Equal(created.Time) || hp.UID != "u-2" {
		t.Fatalf("HostPort service of a pod: %v, created %v, UID %q", ok, hp.CreationTime, hp.UID)
	}
}

// The load balancer's warnings become Events on the Service, or on the
// pod of a HostPort service, naming its UID; an object the caches do not
// hold gets none.
func TestServiceEvents(t *testing.T) {
	pod := k8stest.Pod("ns", "p", ports(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}), func(p *corev1.Pod) {
		p.UID, p.Spec.NodeName = "u-pod", "node-a"
	})
	kube := kubefake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-web"}}, pod)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	src, err := agent.StartServiceSource(ctx, kube, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx); err != nil {
		t.Fatal(err)
	}
	events := agent.NewServiceEvents(kube, src, "node-a")
	events.Start(ctx)
	events.Warn(loadbalancer.ServiceName{Namespace: "ns", Name: "gone"}, loadbalancer.ReasonServiceRefused, "lost")
	events.Warn(loadbalancer.ServiceName{Namespace: "ns", Name: "web"}, loadbalancer.ReasonServiceRefused, "too large")
	events.Warn(loadbalancer.HostPortName("ns", "p"), loadbalancer.ReasonFrontendConflict, "taken")
	want := "Pod ns/p u-pod Warning FrontendConflict: taken\nService ns/web u-web Warning ServiceRefused: too large"
	testenv.Eventually(t, 30*time.Second, func() error {
		evs, err := kube.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, e := range evs.Items {
			o := e.InvolvedObject
			got = append(got, fmt.Sprintf("%s %s/%s %s %s %s: %s", o.Kind, o.Namespace, o.Name, o.UID, e.Type, e.Reason, e.Message))
		}
		slices.Sort(got)
		if strings.Join(got, "\n") != want {
			return fmt.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
		}
		return nil
	})
}
