package gc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cilium-go/cilium/operator/k8s"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	ciliumclient "github.com/cilium-go/cilium/pkg/k8s/client"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func identity(name, unusedSince string) *v2.CiliumIdentity {
	id := &v2.CiliumIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if unusedSince != "" {
		id.Annotations = map[string]string{UnusedSinceAnnotation: unusedSince}
	}
	return id
}

func endpoint(ns, name string, identity int64, podUID types.UID) *v2.CiliumEndpoint {
	ep := &v2.CiliumEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("cep-" + name)}}
	if identity != 0 {
		ep.Status.Identity = &v2.EndpointIdentity{ID: identity}
	}
	if podUID != "" {
		ep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: podUID}}
	}
	return ep
}

func pod(ns, name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func collector(t *testing.T, pods []runtime.Object, cilium ...runtime.Object) (*Collector, *ciliumclient.Fake, *clock) {
	clk := &clock{t0}
	cs := ciliumclient.NewFake(cilium...)
	return &Collector{Log: hivetest.Logger(t), Clients: k8s.Clients{Kube: fake.NewClientset(pods...), Cilium: cs},
		Grace: 30 * time.Minute, Now: clk.Now}, cs, clk
}

// identities is every identity's name and unused-since mark.
func identities(t *testing.T, cs *ciliumclient.Fake) map[string]string {
	t.Helper()
	l, err := cs.CiliumV2().CiliumIdentities().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, id := range l.Items {
		out[id.Name] = id.Annotations[UnusedSinceAnnotation]
	}
	return out
}

func TestCollectIdentities(t *testing.T) {
	mark := func(d time.Duration) string { return t0.Add(-d).Format(time.RFC3339) }
	c, cs, clk := collector(t, nil,
		endpoint("default", "a", 1000, ""), endpoint("default", "b", 1004, ""),
		identity("1000", ""),                   // in use
		identity("1001", ""),                   // newly unused
		identity("1002", mark(10*time.Minute)), // unused, in grace
		identity("1003", mark(time.Hour)),      // unused past grace
		identity("1004", mark(time.Hour)),      // in use again
		identity("1005", "garbage"),            // unreadable mark: start over
	)
	ctx := context.Background()
	for _, step := range []struct {
		advance time.Duration
		want    map[string]string
	}{
		{0, map[string]string{"1000": "", "1001": mark(0), "1002": mark(10 * time.Minute), "1004": "", "1005": mark(0)}},
		{20 * time.Minute, map[string]string{"1000": "", "1001": mark(0), "1004": "", "1005": mark(0)}},
		{11 * time.Minute, map[string]string{"1000": "", "1004": ""}},
	} {
		clk.now = clk.now.Add(step.advance)
		if err := c.CollectIdentities(ctx); err != nil {
			t.Fatal(err)
		}
		if got := identities(t, cs); !equal(got, step.want) {
			t.Fatalf("at %s: identities %v, want %v", clk.now.Sub(t0), got, step.want)
		}
	}
}

func TestCollectEndpoints(t *testing.T) {
	c, cs, _ := collector(t,
		[]runtime.Object{pod("ns1", "a", "a"), pod("ns1", "b", "b2"), pod("ns1", "d", "d")},
		endpoint("ns1", "a", 0, "a"),  // pod alive
		endpoint("ns1", "b", 0, "b1"), // pod recreated: stale
		endpoint("ns2", "a", 0, "x"),  // same name, other namespace, no pod
		endpoint("ns1", "d", 0, ""),   // no owner reference: name is all we know
	)
	if err := c.CollectEndpoints(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := cs.CiliumV2().CiliumEndpoints("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ep := range l.Items {
		got = append(got, ep.Namespace+"/"+ep.Name)
	}
	slices.Sort(got)
	if want := []string{"ns1/a", "ns1/d"}; !slices.Equal(got, want) {
		t.Fatalf("endpoints left %v, want %v", got, want)
	}
}

func TestCollectReportsAPIErrors(t *testing.T) {
	c, cs, _ := collector(t, nil, endpoint("ns", "gone", 0, "u"), identity("1001", "2020-01-01T00:00:00Z"))
	cs.PrependReactor("delete", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd down")
	})
	ctx := context.Background()
	if err := c.CollectEndpoints(ctx); err == nil || !strings.Contains(err.Error(), "delete CiliumEndpoint ns/gone: etcd down") {
		t.Errorf("endpoints: %v", err)
	}
	if err := c.CollectIdentities(ctx); err == nil || !strings.Contains(err.Error(), "delete CiliumIdentity 1001: etcd down") {
		t.Errorf("identities: %v", err)
	}
}

func TestConfigValidateNamesFlag(t *testing.T) {
	c := DefaultConfig
	c.IdentityGCGracePeriod = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--identity-gc-grace-period") {
		t.Fatalf("error %v", err)
	}
	if err := DefaultConfig.Validate(); err != nil {
		t.Fatal(err)
	}
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
