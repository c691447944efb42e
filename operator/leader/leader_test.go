package leader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/operator/k8s"
)

// fastConfig keeps failover under a couple of seconds.
func fastConfig(id string) Config {
	c := DefaultConfig
	c.Identity = id
	c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 2*time.Second, time.Second, 100*time.Millisecond
	return c
}

// journal records controller starts and stops in order, and when.
type journal struct {
	mu     sync.Mutex
	events []string
	times  []time.Time
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
	j.times = append(j.times, time.Now())
}

// when is the time of the first event e.
func (j *journal) when(e string) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, got := range j.events {
		if got == e {
			return j.times[i], true
		}
	}
	return time.Time{}, false
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

// failover bounds every wait for a leader: fastConfig's lease lapses
// in two seconds.
const failover = 20 * time.Second

// leads is nil once e leads and the controller runs are want.
func leads(e *Elector, id string, j *journal, want string) error {
	if !e.IsLeader() {
		return fmt.Errorf("%s does not lead (controller runs %q)", id, j)
	}
	if got := j.String(); got != want {
		return fmt.Errorf("%s leads, controller runs %q, want %q", id, got, want)
	}
	return nil
}

// holds is nil once the lease names id as its holder.
func holds(cs *fake.Clientset, id string) error {
	if got := holder(cs); got != id {
		return fmt.Errorf("lease held by %q, want %q", got, id)
	}
	return nil
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

func holder(cs *fake.Clientset) string {
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
	testenv.Eventually(t, failover, func() error { return leads(a, "a", j, "a+") })
	b := start(t, cs, "b", j)
	// b has seen a's lease once it logged a as leader; it must not lead.
	testenv.Eventually(t, failover, func() error { return holds(cs, "a") })
	if b.IsLeader() {
		t.Fatal("b leads while a holds the lease")
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// b leads a moment before its controller starts: wait for both.
	testenv.Eventually(t, failover, func() error {
		if !b.IsLeader() {
			return errors.New("b does not lead")
		}
		if !strings.Contains(j.String(), "b+") {
			return errors.New("b's controller has not started")
		}
		return holds(cs, "b")
	})
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
	testenv.Eventually(t, failover, func() error { return leads(b, "b", j, "b+") })
	// When b's controller started, not when the poll saw it: the poll's
	// interval must not hide an early takeover.
	started, _ := j.when("b+")
	if waited := started.Sub(begin); waited < time.Second {
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
