package lbipam

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/k8s/k8stest"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
	lbipamk8s "github.com/cilium-go/cilium/pkg/lbipam/k8s"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func service(name string, age int, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func pool(name string, age int, mutate ...func(*v2.CiliumLoadBalancerIPPool)) *v2.CiliumLoadBalancerIPPool {
	p := &v2.CiliumLoadBalancerIPPool{ObjectMeta: metav1.ObjectMeta{Name: name,
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func cidrs(allowFirstLast v2.AllowFirstLastIPType, cs ...string) func(*v2.CiliumLoadBalancerIPPool) {
	return func(p *v2.CiliumLoadBalancerIPPool) {
		p.Spec.AllowFirstLastIPs = allowFirstLast
		for _, c := range cs {
			p.Spec.Blocks = append(p.Spec.Blocks, v2.CiliumLoadBalancerIPPoolIPBlock{Cidr: v2.IPv4orIPv6CIDR(c)})
		}
	}
}

type env struct {
	kube   *fake.Clientset
	cilium *ciliumclient.Fake
	stop   func()
}

func run(t *testing.T, svcs []runtime.Object, pools ...runtime.Object) *env {
	t.Helper()
	e := &env{kube: fake.NewClientset(svcs...), cilium: ciliumclient.NewFake(pools...)}
	e.start(t)
	return e
}

// start runs a controller until stop, as a leader does until it loses the
// lease.
func (e *env) start(t *testing.T) {
	t.Helper()
	l := New(hivetest.Logger(t), k8s.Clients{Kube: e.kube, Cilium: e.cilium}, DefaultConfig)
	e.stop = k8stest.Start(t, "LB-IPAM", l.Run)
}

// state is each Service's addresses, or its condition's reason when it
// has none, and each pool's conditions.
func (e *env) state(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	svcs, err := e.kube.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		var ips []string
		for _, ing := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, ing.IP)
		}
		v := strings.Join(ips, ",")
		if c := meta.FindStatusCondition(s.Status.Conditions, lbipamk8s.ConditionSatisfied); c != nil {
			v += " " + string(c.Status) + "/" + c.Reason
		}
		out[s.Name] = v
	}
	pools, err := e.cilium.CiliumV2().CiliumLoadBalancerIPPools().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools.Items {
		var parts []string
		for _, typ := range []string{lbipamk8s.ConditionIPsTotal, lbipamk8s.ConditionIPsUsed, lbipamk8s.ConditionIPsAvailable} {
			if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
				parts = append(parts, c.Message)
			}
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, lbipamk8s.ConditionPoolConflict); c != nil {
			parts = append(parts, "conflict="+string(c.Status))
		}
		out["pool/"+p.Name] = strings.Join(parts, " ")
	}
	return out
}

func (e *env) waitFor(t *testing.T, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		got := e.state(t)
		for k, v := range want {
			if got[k] != v {
				return fmt.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
			}
		}
		return nil
	})
}

// Services of LB-IPAM get addresses from the pool, oldest first, and a
// restarted (or new) leader moves none of them; others are left alone.
func TestAddressesSurviveRestart(t *testing.T) {
	other := "example.com/other"
	e := run(t, []runtime.Object{
		service("b", 2), service("a", 1), service("c", 3),
		service("foreign", 0, func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other }),
		service("internal", 0, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }),
	}, pool("pool", 0, cidrs(v2.AllowFirstLastIPNo, "198.51.100.0/30")))
	e.waitFor(t, map[string]string{
		"a": "198.51.100.1 True/satisfied", "b": "198.51.100.2 True/satisfied", "c": " False/out_of_ips",
		"foreign": "", "internal": "", "pool/pool": "2 2 0 conflict=False",
	})

	// The leader goes; a goes; the next leader gives a's address to c and
	// leaves b's where it is.
	e.stop()
	if err := e.kube.CoreV1().Services("default").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	e.waitFor(t, map[string]string{"b": "198.51.100.2 True/satisfied", "c": "198.51.100.1 True/satisfied",
		"pool/pool": "2 2 0 conflict=False"})
}

// A pool that overlaps an older one says so and hands out nothing; a
// Service that asks for an address gets it or a condition saying why not.
func TestConflictAndRequests(t *testing.T) {
	e := run(t, []runtime.Object{
		service("asks", 1, func(s *corev1.Service) { s.Annotations = map[string]string{"lbipam.cilium.io/ips": "192.0.2.9"} }),
		service("legacy", 2, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.9" }),
		service("nowhere", 3, func(s *corev1.Service) { s.Annotations = map[string]string{"lbipam.cilium.io/ips": "203.0.113.1"} }),
		service("bad", 4, func(s *corev1.Service) { s.Annotations = map[string]string{"lbipam.cilium.io/ips": "not-an-ip"} }),
	},
		pool("older", 0, cidrs("", "192.0.2.0/28")),
		pool("younger", 1, cidrs("", "192.0.2.8/29")))
	e.waitFor(t, map[string]string{
		"asks": "192.0.2.9 True/satisfied", "legacy": " False/already_allocated", "nowhere": " False/no_pool",
		"bad": " False/no_pool", "pool/older": "16 1 15 conflict=False", "pool/younger": "8 0 8 conflict=True",
	})
}
