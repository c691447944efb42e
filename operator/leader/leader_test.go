package leader

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/cilium-go/cilium/operator/k8s"
)

// fastConfig keeps failover under a couple of seconds.
func fastConfig(id string) Config {
	c := DefaultConfig
	c.Identity = id
	c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 2*time.Second, time.Second, 100*time.Millisecond
	return c
}

// journal records controller starts and stops in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.events, " ")
}

func (j *journal) controller(id string) Controller {
	return Controller{Name: "test", Run: func(ctx context.Context) error {
		j.add(id + "+")
		<-ctx.Done()
		j.add(id + "-")
		return nil
	}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func start(t *testing.T, cs *fake.Clientset, id string, j *journal) *Elector {
	t.Helper()
	e, err := New(hivetest.Logger(t), fastConfig(id), k8s.Clients{Kube: cs}, []Controller{j.controller(id)})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}

func holder(t *testing.T, cs *fake.Clientset) string {
	l, err := cs.CoordinationV1().Leases("kube-system").Get(context.Background(), DefaultConfig.LeaseName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func TestStandbyTakesOverWhenLeaderStops(t *testing.T) {
	cs := fake.NewClientset()
	j := &journal{}
	a := start(t, cs, "a", j)
	waitFor(t, "a leads", func() bool { return a.IsLeader() && j.String() == "a+" })
	b := start(t, cs, "b", j)
	// b has seen a's lease once it logged a as leader; it must not lead.
	waitFor(t, "b campaigns", func() bool { return holder(t, cs) == "a" })
	if b.IsLeader() {
		t.Fatal("b leads while a holds the lease")
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b leads", func() bool { return b.IsLeader() && holder(t, cs) == "b" })
	if got := j.String(); got != "a+ a- b+" {
		t.Fatalf("controller runs %q, want a's to end before b's starts", got)
	}
}

func TestStandbyTakesOverWhenLeaseLapses(t *testing.T) {
	// A leader that died without releasing: its lease is fresh now and
	// lapses after its duration.
	now := metav1.NewMicroTime(time.Now())
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultConfig.LeaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"), LeaseDurationSeconds: ptr.To[int32](2),
			AcquireTime: &now, RenewTime: &now},
	})
	j := &journal{}
	begin := time.Now()
	b := start(t, cs, "b", j)
	waitFor(t, "b leads", func() bool { return b.IsLeader() && j.String() == "b+" })
	if waited := time.Since(begin); waited < time.Second {
		t.Fatalf("b took over after %s, before the lease lapsed", waited)
	}
}

func TestConfigValidateNamesFlag(t *testing.T) {
	for _, tc := range []struct {
		tweak func(*Config)
		flag  string
	}{
		{func(c *Config) { c.Namespace = "" }, "--leader-election-namespace"},
		{func(c *Config) { c.RetryPeriod = 0 }, "--leader-election-retry-period"},
		{func(c *Config) { c.RenewDeadline = c.RetryPeriod }, "--leader-election-renew-deadline"},
		{func(c *Config) { c.LeaseDuration = c.RenewDeadline }, "--leader-election-lease-duration"},
	} {
		c := DefaultConfig
		tc.tweak(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("error %v, want it to name %s", err, tc.flag)
		}
	}
	if err := DefaultConfig.Validate(); err != nil {
		t.Fatal(err)
	}
}
