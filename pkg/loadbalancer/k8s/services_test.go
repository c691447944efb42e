package k8s_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
)

// Of two Services claiming one frontend the older gets it: the load
// balancer reads the age and UID of the Service, and of the pod of a
// HostPort service.
func TestServiceAge(t *testing.T) {
	created := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	svc := lbk8s.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-1",
		CreationTimestamp: created}})
	if !svc.CreationTime.Equal(created.Time) || svc.UID != "u-1" {
		t.Fatalf("Service: created %v, UID %q", svc.CreationTime, svc.UID)
	}
	pod := k8stest.Pod("ns", "p", ports(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}), func(p *corev1.Pod) {
		p.UID, p.CreationTimestamp = "u-2", created
	})
	hp, _, ok := lbk8s.HostPortService(pod, pod.Spec.NodeName)
	if !ok || !hp.CreationTime.Equal(created.Time) || hp.UID != "u-2" {
		t.Fatalf("HostPort service of a pod: %v, created %v, UID %q", ok, hp.CreationTime, hp.UID)
	}
}

// A row touches the service it belongs to: a slice its Service's, by
// label; a pod its HostPort service while it names a hostPort, whether or
// not that is mapped yet.
func TestTouches(t *testing.T) {
	labelled := func(labels map[string]string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: labels}}
	}
	withPorts := func(ps ...corev1.ContainerPort) *corev1.Pod {
		return k8stest.Pod("ns", "p", func(p *corev1.Pod) { p.Spec.Containers = []corev1.Container{{Name: "c", Ports: ps}} })
	}
	tests := []struct {
		name string
		got  func() (loadbalancer.ServiceName, bool)
		want string // "" for none
	}{
		{"slice of a Service", func() (loadbalancer.ServiceName, bool) {
			return lbk8s.SliceService(labelled(map[string]string{discoveryv1.LabelServiceName: "web"}))
		}, "ns/web"},
		{"slice of nothing", func() (loadbalancer.ServiceName, bool) { return lbk8s.SliceService(labelled(nil)) }, ""},
		{"pod with a hostPort, no address yet", func() (loadbalancer.ServiceName, bool) {
			return lbk8s.PodService(withPorts(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}))
		}, "ns/hostport:p"},
		{"pod without", func() (loadbalancer.ServiceName, bool) {
			return lbk8s.PodService(withPorts(corev1.ContainerPort{ContainerPort: 80}))
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ok := tt.got()
			got := ""
			if ok {
				got = n.String()
			}
			if got != tt.want {
				t.Errorf("touches %q, want %q", got, tt.want)
			}
		})
	}
}
