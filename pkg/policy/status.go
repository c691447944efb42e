package policy

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// ConditionValid is the condition on a Cilium policy that says whether
// the agents accepted it, as Cilium's agents write it.
const ConditionValid = "Valid"

// reporter tells a policy's author what the agent made of it: a warning
// event on an object it refused (its previous rules stay in force), and
// on Cilium's policies the Valid condition. Conditions are written in
// the background by one worker, the latest verdict on a policy winning,
// through a client of their own: a thousand policies created at once
// must not hold up the agent's identity and endpoint writes behind them.
type reporter struct {
	log      *slog.Logger
	cilium   client.Interface
	recorder record.EventRecorder

	mu      sync.Mutex
	pending map[statusKey]v2.NetworkPolicyCondition
	order   []statusKey // pending's keys, oldest first
	wake    chan struct{}
}

type statusKey struct{ kind, namespace, name string }

func newReporter(ctx context.Context, log *slog.Logger, c *k8sagent.Clients, node string) *reporter {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	rec := b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "cilium-agent", Host: node})
	r := &reporter{log: log, cilium: c.Status, recorder: rec,
		pending: map[statusKey]v2.NetworkPolicyCondition{}, wake: make(chan struct{}, 1)}
	if r.cilium == nil {
		r.cilium = c.Cilium
	}
	go r.run(ctx)
	return r
}

// report records the verdict on obj (err nil: accepted), in the
// background: the informers must not wait for the API server.
func (r *reporter) report(kind string, obj metav1.Object, err error) {
	if err != nil {
		ref := &corev1.ObjectReference{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion()}
		if kind == KindNetworkPolicy {
			ref.APIVersion = "networking.k8s.io/v1"
		} else {
			ref.APIVersion = v2.SchemeGroupVersion.String()
		}
		r.recorder.Event(ref, corev1.EventTypeWarning, "PolicyRejected",
			"refused, its previous rules stay in force: "+err.Error())
	}
	if kind == KindNetworkPolicy {
		return // NetworkPolicy has no status
	}
	cond := v2.NetworkPolicyCondition{Type: ConditionValid, Status: metav1.ConditionTrue, Reason: "Accepted"}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Rejected", err.Error()
	}
	k := statusKey{kind, obj.GetNamespace(), obj.GetName()}
	r.mu.Lock()
	if _, queued := r.pending[k]; !queued {
		r.order = append(r.order, k)
	}
	r.pending[k] = cond
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run writes the pending conditions one at a time until ctx ends.
func (r *reporter) run(ctx context.Context) {
	for {
		r.mu.Lock()
		var k statusKey
		cond, ok := v2.NetworkPolicyCondition{}, len(r.order) > 0
		if ok {
			k, r.order = r.order[0], r.order[1:]
			cond = r.pending[k]
			delete(r.pending, k)
		}
		r.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		if err := r.setCondition(ctx, k.kind, k.namespace, k.name, cond); err != nil && ctx.Err() == nil {
			r.log.Warn("policy status not written", "kind", k.kind, "namespace", k.namespace, "name", k.name, "error", err)
		}
	}
}

// setCondition writes cond into the policy's status unless it is there,
// retrying on conflicts with other agents writing the same.
func (r *reporter) setCondition(ctx context.Context, kind, ns, name string, cond v2.NetworkPolicyCondition) error {
	for range 5 {
		var err error
		switch kind {
		case KindCNP:
			api := r.cilium.CiliumV2().CiliumNetworkPolicies(ns)
			var p *v2.CiliumNetworkPolicy
			if p, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil && withCondition(&p.Status, cond) {
				_, err = api.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		case KindCCNP:
			api := r.cilium.CiliumV2().CiliumClusterwideNetworkPolicies()
			var p *v2.CiliumClusterwideNetworkPolicy
			if p, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil && withCondition(&p.Status, cond) {
				_, err = api.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		default:
			return fmt.Errorf("no status for kind %s", kind)
		}
		if k8serrors.IsNotFound(err) {
			return nil // deleted meanwhile
		}
		if !k8serrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("status of %s %s/%s: too many conflicts", kind, ns, name)
}

// withCondition puts cond into s and reports whether that changed it.
func withCondition(s *v2.CiliumNetworkPolicyStatus, cond v2.NetworkPolicyCondition) bool {
	for i, c := range s.Conditions {
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return false
		}
		cond.LastTransitionTime = metav1.Now()
		s.Conditions[i] = cond
		return true
	}
	cond.LastTransitionTime = metav1.Now()
	s.Conditions = append(s.Conditions, cond)
	return true
}
