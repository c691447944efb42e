package ipam

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/k8s/k8stest"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
)

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
}

func ciliumNode(name string, age time.Duration, cidrs ...string) *v2.CiliumNode {
	cn := &v2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name,
		CreationTimestamp: metav1.NewTime(time.Now().Add(-age))}}
	cn.Spec.IPAM.PodCIDRs = cidrs
	return cn
}

type env struct {
	kube   *fake.Clientset
	cilium *ciliumclient.Fake
	stop   func()
}

// run starts an allocator over pool cidrs/mask on the given objects; the
// returned stop ends it and waits, as losing leadership does.
func run(t *testing.T, cidrs []string, mask int, nodes []runtime.Object, cns ...runtime.Object) *env {
	t.Helper()
	e := &env{kube: fake.NewClientset(nodes...), cilium: ciliumclient.NewFake(cns...)}
	e.start(t, cidrs, mask)
	return e
}

func (e *env) start(t *testing.T, cidrs []string, mask int) {
	t.Helper()
	p, err := Config{ClusterPoolIPv4CIDR: cidrs, ClusterPoolIPv4MaskSize: mask}.NewPool()
	if err != nil {
		t.Fatal(err)
	}
	a := NewAllocator(hivetest.Logger(t), k8s.Clients{Kube: e.kube, Cilium: e.cilium}, p)
	e.stop = k8stest.Start(t, "allocator", a.Run)
}

// cidrs is every CiliumNode's pod CIDRs, joined.
func (e *env) cidrs(t *testing.T) map[string]string {
	t.Helper()
	l, err := e.cilium.CiliumV2().CiliumNodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cn := range l.Items {
		out[cn.Name] = strings.Join(cn.Spec.IPAM.PodCIDRs, ",")
	}
	return out
}

// waitFor waits until the CiliumNodes' pod CIDRs are want.
func (e *env) waitFor(t *testing.T, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := e.cidrs(t); !equal(got, want) {
			return fmt.Errorf("CiliumNodes %v, want %v", got, want)
		}
		return nil
	})
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestAllocator(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []runtime.Object
		cns   []runtime.Object
		want  map[string]string
	}{
		{
			name:  "new nodes get the lowest free CIDRs",
			nodes: []runtime.Object{node("a"), node("b")},
			want:  map[string]string{"a": "10.1.0.0/24", "b": "10.1.1.0/24"},
		},
		{
			name:  "existing CIDRs are kept and not handed out again",
			nodes: []runtime.Object{node("a"), node("b")},
			cns:   []runtime.Object{ciliumNode("b", time.Hour, "10.1.0.0/24")},
			want:  map[string]string{"a": "10.1.1.0/24", "b": "10.1.0.0/24"},
		},
		{
			name:  "a CIDR claimed twice stays with the older node",
			nodes: []runtime.Object{node("a"), node("b")},
			cns: []runtime.Object{ciliumNode("a", time.Minute, "10.1.0.0/24"),
				ciliumNode("b", time.Hour, "10.1.0.0/24")},
			want: map[string]string{"a": "10.1.1.0/24", "b": "10.1.0.0/24"},
		},
		{
			name:  "a CIDR outside the pool is replaced",
			nodes: []runtime.Object{node("a")},
			cns:   []runtime.Object{ciliumNode("a", time.Hour, "192.168.0.0/24")},
			want:  map[string]string{"a": "10.1.0.0/24"},
		},
		{
			name:  "a CiliumNode without a Node is deleted and its CIDR reused",
			nodes: []runtime.Object{node("a")},
			cns:   []runtime.Object{ciliumNode("gone", time.Hour, "10.1.0.0/24")},
			want:  map[string]string{"a": "10.1.0.0/24"},
		},
		{
			name:  "nodes beyond the pool wait",
			nodes: []runtime.Object{node("a"), node("b"), node("c")},
			want:  map[string]string{"a": "10.1.0.0/24", "b": "10.1.1.0/24"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := run(t, []string{"10.1.0.0/23"}, 24, tc.nodes, tc.cns...)
			e.waitFor(t, tc.want)
		})
	}
}

func TestAllocatorOwnerReference(t *testing.T) {
	e := run(t, []string{"10.1.0.0/16"}, 24, []runtime.Object{node("a")})
	e.waitFor(t, map[string]string{"a": "10.1.0.0/24"})
	cn, err := e.cilium.CiliumV2().CiliumNodes().Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].Kind != "Node" || cn.OwnerReferences[0].UID != "uid-a" {
		t.Fatalf("owner references %+v", cn.OwnerReferences)
	}
}

func TestDeletedNodeReleasesItsCIDR(t *testing.T) {
	ctx := context.Background()
	e := run(t, []string{"10.1.0.0/23"}, 24, []runtime.Object{node("a"), node("b"), node("c")})
	e.waitFor(t, map[string]string{"a": "10.1.0.0/24", "b": "10.1.1.0/24"})
	if err := e.kube.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// c, waiting for a CIDR, gets the one a released.
	e.waitFor(t, map[string]string{"b": "10.1.1.0/24", "c": "10.1.0.0/24"})
}

// TestNewLeaderContinuesAllocation stops one allocator and starts another on
// the same objects, as a failover does: existing nodes keep their CIDRs and
// a node added in between gets a free one.
func TestNewLeaderContinuesAllocation(t *testing.T) {
	ctx := context.Background()
	e := run(t, []string{"10.1.0.0/16"}, 24, []runtime.Object{node("a"), node("b"), node("c")})
	want := map[string]string{"a": "10.1.0.0/24", "b": "10.1.1.0/24", "c": "10.1.2.0/24"}
	e.waitFor(t, want)
	e.stop()
	if err := e.kube.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, node("d"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.start(t, []string{"10.1.0.0/16"}, 24)
	// d gets a's CIDR only once it is freed, the lowest free one.
	e.waitFor(t, map[string]string{"b": "10.1.1.0/24", "c": "10.1.2.0/24", "d": "10.1.0.0/24"})
}

func TestConfigValidateNamesFlag(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{[]string{"10.0.0.0/33"}, 24}, `--cluster-pool-ipv4-cidr "10.0.0.0/33"`},
		{Config{[]string{"10.0.0.0/16"}, 8}, "--cluster-pool-ipv4-mask-size 8"},
		{Config{nil, 24}, "no cluster CIDR"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
