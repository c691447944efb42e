package policy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// ConditionValid is the condition on a Cilium policy that says whether
// the agents accepted it, as Cilium's agents write it.
const ConditionValid = "Valid"

// reporter tells a policy's author what the agent made of it: a warning
// event on an object it refused (its previous rules stay in force), and
// on Cilium's policies the Valid condition.
type reporter struct {
	log      *slog.Logger
	clients  *k8sagent.Clients
	recorder record.EventRecorder
}

func newReporter(ctx context.Context, log *slog.Logger, c *k8sagent.Clients, node string) *reporter {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	rec := b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "cilium-agent", Host: node})
	return &reporter{log: log, clients: c, recorder: rec}
}

// report records the verdict on obj (err nil: accepted), in the
// background: the informers must not wait for the API server.
func (r *reporter) report(ctx context.Context, kind string, obj metav1.Object, err error) {
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
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := r.setCondition(ctx, kind, obj.GetNamespace(), obj.GetName(), cond); err != nil {
			r.log.Warn("policy status not written", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "error", err)
		}
	}()
}

// setCondition writes cond into the policy's status unless it is there,
// retrying on conflicts with other agents writing the same.
func (r *reporter) setCondition(ctx context.Context, kind, ns, name string, cond v2.NetworkPolicyCondition) error {
	for range 5 {
		var err error
		switch kind {
		case KindCNP:
			api := r.clients.Cilium.CiliumV2().CiliumNetworkPolicies(ns)
			var p *v2.CiliumNetworkPolicy
			if p, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil && withCondition(&p.Status, cond) {
				_, err = api.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		case KindCCNP:
			api := r.clients.Cilium.CiliumV2().CiliumClusterwideNetworkPolicies()
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
