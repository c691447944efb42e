package allocator

import (
	"context"
	"errors"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/labels"
)

// Stale reports whether the identity held for pod no longer matches the
// security labels of in: the pod's or its namespace's labels changed.
// A pod without a held identity is not stale (it has none to change).
func (a *PodIdentities) Stale(pod endpoint.Pod, in labels.PodInput) bool {
	a.mu.Lock()
	id, ok := a.byPod[pod]
	a.mu.Unlock()
	return ok && !id.Labels.Equal(a.securityLabels(in))
}

// Relabeler gives local endpoints a new identity when their pod's
// security labels change.
type Relabeler struct {
	pods       statedb.Table[*corev1.Pod]
	namespaces statedb.Table[*corev1.Namespace]
	ids        *PodIdentities
	eps        *endpoint.Manager
}

// Sync refreshes the identity of every local endpoint whose labels moved,
// as the pods and namespaces are in txn.
func (r Relabeler) Sync(ctx context.Context, txn statedb.ReadTxn, local []endpoint.Endpoint) error {
	var errs []error
	for _, ep := range local {
		pod := endpoint.Pod{Namespace: ep.PodNamespace, Name: ep.PodName}
		in, ok := PodInput(txn, r.pods, r.namespaces, pod)
		if !ok || !r.ids.Stale(pod, in) {
			continue
		}
		if _, err := r.eps.RefreshIdentity(ctx, ep.ContainerID); err != nil && !errors.Is(err, endpoint.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PodInput reads a pod and its namespace as of txn: what bears on the
// pod's identity.
func PodInput(txn statedb.ReadTxn, pods statedb.Table[*corev1.Pod], namespaces statedb.Table[*corev1.Namespace],
	pod endpoint.Pod) (labels.PodInput, bool) {
	p, ok := tables.Get(txn, pods, pod.Namespace+"/"+pod.Name)
	if !ok {
		return labels.PodInput{}, false
	}
	ns, ok := tables.Get(txn, namespaces, pod.Namespace)
	if !ok {
		return labels.PodInput{}, false
	}
	return labels.PodInput{PodLabels: p.Labels, Namespace: p.Namespace, NamespaceLabels: ns.Labels,
		ServiceAccount: p.Spec.ServiceAccountName}, true
}
