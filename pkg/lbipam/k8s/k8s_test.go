package k8s

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/lbipam"
)

func block(cidr, start, stop string) v2.CiliumLoadBalancerIPPoolIPBlock {
	return v2.CiliumLoadBalancerIPPoolIPBlock{Cidr: v2.IPv4orIPv6CIDR(cidr), Start: start, Stop: stop}
}

// A pool's blocks become ranges; a block that is none is an error naming
// it, and so is a selector the API server let through but that selects
// nothing well-formed.
func TestPoolOf(t *testing.T) {
	p := &v2.CiliumLoadBalancerIPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v2.CiliumLoadBalancerIPPoolSpec{
		AllowFirstLastIPs: v2.AllowFirstLastIPNo,
		Blocks:            []v2.CiliumLoadBalancerIPPoolIPBlock{block("10.0.0.0/30", "", ""), block("", "10.0.1.5", "10.0.1.9"), block("", "10.0.2.1", "")},
		ServiceSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}},
	}}
	got, err := PoolOf(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []lbipam.Range{
		{From: netip.MustParseAddr("10.0.0.1"), To: netip.MustParseAddr("10.0.0.2")},
		{From: netip.MustParseAddr("10.0.1.5"), To: netip.MustParseAddr("10.0.1.9")},
		{From: netip.MustParseAddr("10.0.2.1"), To: netip.MustParseAddr("10.0.2.1")},
	}
	if !slices.Equal(got.Ranges, want) || got.Selects == nil || !got.Selects(map[string]string{"color": "blue"}) ||
		got.Selects(map[string]string{"color": "red"}) {
		t.Fatalf("PoolOf: %+v, want ranges %v selecting color=blue", got, want)
	}
	for _, c := range []struct {
		b    v2.CiliumLoadBalancerIPPoolIPBlock
		want string
	}{
		{block("10.0.0.0/33", "", ""), "spec.blocks[0]: cidr"},
		{block("10.0.0.0/24", "10.0.0.1", ""), "one or the other"},
		{block("", "nope", ""), "spec.blocks[0]: start"},
		{block("", "10.0.0.9", "10.0.0.1"), "not a range"},
		{block("", "10.0.0.1", "2001:db8::1"), "not a range"},
	} {
		bad := p.DeepCopy()
		bad.Spec.Blocks = []v2.CiliumLoadBalancerIPPoolIPBlock{c.b}
		if _, err := PoolOf(bad); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "pool p") {
			t.Errorf("PoolOf(%+v): %v, want an error naming the pool and %q", c.b, err, c.want)
		}
	}
}

// A Service's asks, sharing and record, from its spec, annotations (and
// their older aliases) and status.
func TestServiceOf(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				"io.cilium/lb-ipam-ips":                    "10.0.0.7, 10.0.0.8",
				"lbipam.cilium.io/sharing-key":             " k ",
				"lbipam.cilium.io/sharing-cross-namespace": "a,b",
			}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "10.0.0.7",
			Selector: map[string]string{"app": "web"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.7"}, {Hostname: "x"}}}},
	}
	s, err := ServiceOf(svc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Requested, []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8")}) ||
		s.SharingKey != "k" || !slices.Equal(s.ShareWith, []string{"a", "b"}) || !s.ExternalLocal || s.Selector != "app=web" ||
		!slices.Equal(s.Ports, []lbipam.Port{{Port: 80, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}) ||
		!slices.Equal(s.Current, []netip.Addr{netip.MustParseAddr("10.0.0.7")}) ||
		s.Labels["app"] != "web" || s.Labels[lbipam.LabelServiceNamespace] != "shop" || s.Labels[lbipam.LabelServiceName] != "web" {
		t.Fatalf("ServiceOf: %+v", s)
	}
	svc.Annotations["lbipam.cilium.io/ips"] = "10.0.0.300"
	if _, err := ServiceOf(svc); err == nil || !strings.Contains(err.Error(), "10.0.0.300") {
		t.Errorf("a bad address asked for: %v, want an error naming it", err)
	}
	class, other := "io.cilium/l2-announcer", "example.com/x"
	for _, c := range []struct {
		class *string
		typ   corev1.ServiceType
		want  bool
	}{
		{nil, corev1.ServiceTypeLoadBalancer, true},
		{&class, corev1.ServiceTypeLoadBalancer, true},
		{&other, corev1.ServiceTypeLoadBalancer, false},
		{nil, corev1.ServiceTypeNodePort, false},
	} {
		svc.Spec.LoadBalancerClass, svc.Spec.Type = c.class, c.typ
		if got := Ours(svc, true, []string{class}); got != c.want {
			t.Errorf("Ours(class %v, type %s) = %v, want %v", c.class, c.typ, got, c.want)
		}
	}
}
