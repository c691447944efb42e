package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy"
)

// ConditionValid is the condition on a Cilium policy that says whether
// the agents accepted it, as Cilium's agents write it.
const ConditionValid = "Valid"

// Reporter tells a policy's author what the agent made of it: a warning
// event on an object it refused (its previous rules stay in force), and
// on Cilium's policies the Valid condition. Conditions are written in
// the background by one worker, the latest verdict on a policy winning,
// through a client of their own: a thousand policies created at once
// must not hold up the agent's identity and endpoint writes behind them.
type Reporter struct {
	log      *slog.Logger
	cilium   client.Interface
	recorder record.EventRecorder

	node string

	mu      sync.Mutex
	pending map[statusKey]v2.NetworkPolicyCondition
	order   []statusKey // pending's keys, oldest first
	// refusals are this node's status entries to write: an error, or ""
	// to remove the node's entry.
	refusals     map[statusKey]string
	refusalOrder []statusKey
	wake         chan struct{}
}

type statusKey struct{ kind, namespace, name string }

func NewReporter(ctx context.Context, log *slog.Logger, c *k8sagent.Clients, node string) *Reporter {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	rec := b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "cilium-agent", Host: node})
	r := &Reporter{log: log, cilium: c.Status, recorder: rec, node: node,
		pending: map[statusKey]v2.NetworkPolicyCondition{}, refusals: map[statusKey]string{}, wake: make(chan struct{}, 1)}
	if r.cilium == nil {
		r.cilium = c.Cilium
	}
	go r.run(ctx)
	return r
}

// Report records the verdict on obj (err nil: accepted), in the
// background: the policy engine must not wait for the API server.
func (r *Reporter) Report(kind string, obj metav1.Object, err error) {
	if err != nil {
		ref := objectReference(policy.Origin{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()})
		ref.UID, ref.ResourceVersion = obj.GetUID(), obj.GetResourceVersion()
		r.recorder.Event(ref, corev1.EventTypeWarning, "PolicyRejected",
			"refused, its previous rules stay in force: "+err.Error())
	}
	if kind == policy.KindNetworkPolicy {
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

// ReportRefusal tells a policy's author that this node refuses it for some of
// its endpoints, whose policy maps it does not fit (msg says which and
// why), or no longer does (msg ""): a warning event, and on Cilium's
// policies this node's entry of status.nodes, which no other agent
// writes. Written in the background, as Report is.
func (r *Reporter) ReportRefusal(o policy.Origin, msg string) {
	if msg != "" {
		r.recorder.Event(objectReference(o), corev1.EventTypeWarning, "PolicyRefused",
			fmt.Sprintf("refused on node %s: %s", r.node, msg))
	}
	if o.Kind != policy.KindCNP && o.Kind != policy.KindCCNP || r.node == "" {
		return
	}
	k := statusKey{o.Kind, o.Namespace, o.Name}
	r.mu.Lock()
	if _, queued := r.refusals[k]; !queued {
		r.refusalOrder = append(r.refusalOrder, k)
	}
	r.refusals[k] = msg
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run writes the pending conditions and node statuses one at a time
// until ctx ends.
func (r *Reporter) run(ctx context.Context) {
	for {
		r.mu.Lock()
		var k statusKey
		var refusal string
		cond, isCond, isRefusal := v2.NetworkPolicyCondition{}, len(r.order) > 0, false
		switch {
		case isCond:
			k, r.order = r.order[0], r.order[1:]
			cond = r.pending[k]
			delete(r.pending, k)
		case len(r.refusalOrder) > 0:
			k, r.refusalOrder, isRefusal = r.refusalOrder[0], r.refusalOrder[1:], true
			refusal = r.refusals[k]
			delete(r.refusals, k)
		}
		r.mu.Unlock()
		var err error
		switch {
		case isCond:
			err = r.setCondition(ctx, k.kind, k.namespace, k.name, cond)
		case isRefusal:
			err = r.setNodeStatus(ctx, k, refusal)
		default:
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("policy status not written", "kind", k.kind, "namespace", k.namespace, "name", k.name, "error", err)
		}
	}
}

// setNodeStatus writes this node's entry of the policy's status.nodes
// (msg ""): removes it) with a merge patch, which touches no other
// node's entry.
func (r *Reporter) setNodeStatus(ctx context.Context, k statusKey, msg string) error {
	var entry any // null removes the entry
	if msg != "" {
		entry = v2.CiliumNetworkPolicyNodeStatus{OK: false, Error: msg, LastUpdated: metav1.Now()}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodes": map[string]any{r.node: entry}}})
	if err != nil {
		return err
	}
	switch k.kind {
	case policy.KindCNP:
		_, err = r.cilium.CiliumV2().CiliumNetworkPolicies(k.namespace).Patch(ctx, k.name, types.MergePatchType, patch,
			metav1.PatchOptions{}, "status")
	case policy.KindCCNP:
		_, err = r.cilium.CiliumV2().CiliumClusterwideNetworkPolicies().Patch(ctx, k.name, types.MergePatchType, patch,
			metav1.PatchOptions{}, "status")
	}
	if k8serrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

// setCondition writes cond into the policy's status unless it is there,
// retrying on conflicts with other agents writing the same.
func (r *Reporter) setCondition(ctx context.Context, kind, ns, name string, cond v2.NetworkPolicyCondition) error {
	for range 5 {
		var err error
		switch kind {
		case policy.KindCNP:
			api := r.cilium.CiliumV2().CiliumNetworkPolicies(ns)
			var p *v2.CiliumNetworkPolicy
			if p, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil && withCondition(&p.Status, cond) {
				_, err = api.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		case policy.KindCCNP:
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

// objectReference names o's object for events.
func objectReference(o policy.Origin) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
		APIVersion: v2.SchemeGroupVersion.String()}
	if o.Kind == policy.KindNetworkPolicy {
		ref.APIVersion = "networking.k8s.io/v1"
	}
	return ref
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

// Reported says whether obj's Valid condition already tells err: then
// there is nothing to write.
func Reported(obj any, err error) bool {
	var st *v2.CiliumNetworkPolicyStatus
	switch p := obj.(type) {
	case *v2.CiliumNetworkPolicy:
		st = &p.Status
	case *v2.CiliumClusterwideNetworkPolicy:
		st = &p.Status
	default:
		return false
	}
	for _, c := range st.Conditions {
		if c.Type == ConditionValid {
			return (err == nil && c.Status == metav1.ConditionTrue) ||
				(err != nil && c.Status == metav1.ConditionFalse && c.Message == err.Error())
		}
	}
	return false
}
