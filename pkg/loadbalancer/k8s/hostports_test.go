package k8s_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	lbk8s "github.com/cilium-go/cilium/pkg/loadbalancer/k8s"
)

// ports makes the pod's one container declare ps and gives the pod an
// address, running.
func ports(ps ...corev1.ContainerPort) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "c", Ports: ps}}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::5"}, {IP: "10.244.1.5"}}
	}
}

func TestHostPortService(t *testing.T) {
	http := corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}
	tests := []struct {
		name string
		pod  *corev1.Pod
		// want is the service's ports and the endpoint's, "" for none.
		want string
	}{
		{"mapped", k8stest.Pod("ns", "p", ports(http,
			corev1.ContainerPort{ContainerPort: 53, HostPort: 53, Protocol: corev1.ProtocolUDP, HostIP: "0.0.0.0"},
			corev1.ContainerPort{ContainerPort: 81, HostPort: 8081, HostIP: "192.168.77.1"},
			corev1.ContainerPort{ContainerPort: 82})),
			"8080:8080/TCP,53:53/UDP,192.168.77.1:8081:8081/TCP -> 10.244.1.5 [192.168.77.1:8081/TCP:81 53/UDP:53 8080/TCP:80]"},
		{"the first of two with the same host side", k8stest.Pod("ns", "p", ports(http,
			corev1.ContainerPort{ContainerPort: 90, HostPort: 8080, HostIP: "0.0.0.0"})),
			"8080:8080/TCP -> 10.244.1.5 [8080/TCP:80]"},
		{"an IPv6 hostIP is not mapped", k8stest.Pod("ns", "p", ports(http,
			corev1.ContainerPort{ContainerPort: 81, HostPort: 8081, HostIP: "fd00::1"})),
			"8080:8080/TCP -> 10.244.1.5 [8080/TCP:80]"},
		{"pending with an address", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
		}), "8080:8080/TCP -> 10.244.1.5 [8080/TCP:80]"},
		{"terminating", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{}
		}), "8080:8080/TCP -> 10.244.1.5 [8080/TCP:80]"},
		{"no hostPort", k8stest.Pod("ns", "p", ports(corev1.ContainerPort{ContainerPort: 80})), ""},
		{"no address", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) { p.Status.PodIPs = nil }), ""},
		{"IPv6 only", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::5"}}
		}), ""},
		{"failed", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), ""},
		{"succeeded", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), ""},
		{"host network", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) { p.Spec.HostNetwork = true }), ""},
		{"another node", k8stest.Pod("ns", "p", ports(http), func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }), ""},
		{"init containers map nothing", k8stest.Pod("ns", "p", ports(), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Ports: []corev1.ContainerPort{http}}}
		}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, eps, ok := lbk8s.HostPortService(tt.pod, "node-a")
			got := ""
			if ok {
				if svc.Name.String() != "ns/hostport:p" || svc.Type != "HostPort" || len(eps) != 1 {
					t.Fatalf("service %s type %s with %d endpoints", svc.Name, svc.Type, len(eps))
				}
				var ps []string
				for _, p := range svc.Ports {
					ps = append(ps, p.String())
				}
				ep := eps[0]
				if !ep.Ready || !ep.Serving || ep.Terminating || ep.NodeName != "node-a" {
					t.Errorf("endpoint %+v: want ready and serving on node-a", ep)
				}
				got = strings.Join(ps, ",") + " -> " + ep.Address.String() + " " + portMap(ep.Ports)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// portMap prints an endpoint's ports, sorted: name/protocol:port.
func portMap(m map[loadbalancer.PortKey]uint16) string {
	var out []string
	for k, p := range m {
		out = append(out, fmt.Sprintf("%s/%s:%d", k.Name, spec.ProtocolName(k.Protocol), p))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}
