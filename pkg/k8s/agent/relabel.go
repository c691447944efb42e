package agent

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/labels"
)

// Stale reports whether the identity held for pod no longer matches the
// security labels of in: the pod's or its namespace's labels changed.
// A pod without a held identity is not stale (it has none to change).
func (a *PodIdentities) Stale(pod endpoint.Pod, in labels.PodInput) bool {
	a.mu.Lock()
	id, ok := a.byPod[pod]
	a.mu.Unlock()
	return ok && !id.Labels.Equal(a.filter.SecurityLabels(in))
}

// podInput reads a local pod and its namespace from the watchers' caches.
func (w *Watchers) podInput(pod endpoint.Pod) (labels.PodInput, bool) {
	p, ok := w.Pod(pod.Namespace, pod.Name)
	if !ok {
		return labels.PodInput{}, false
	}
	obj, ok, err := w.Namespaces.GetStore().GetByKey(pod.Namespace)
	if err != nil || !ok {
		return labels.PodInput{}, false
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return labels.PodInput{}, false
	}
	return labels.PodInput{PodLabels: p.Labels, Namespace: p.Namespace, NamespaceLabels: ns.Labels,
		ServiceAccount: p.Spec.ServiceAccountName}, true
}

// Relabeler gives local endpoints a new identity when their pod's
// security labels change.
type Relabeler struct {
	w   *Watchers
	ids *PodIdentities
	eps *endpoint.Manager
}

// Sync refreshes the identity of every local endpoint whose labels moved.
func (r Relabeler) Sync(ctx context.Context, local []endpoint.Endpoint) error {
	var errs []error
	for _, ep := range local {
		pod := endpoint.Pod{Namespace: ep.PodNamespace, Name: ep.PodName}
		in, ok := r.w.podInput(pod)
		if !ok || !r.ids.Stale(pod, in) {
			continue
		}
		if _, err := r.eps.RefreshIdentity(ctx, ep.ContainerID); err != nil && !errors.Is(err, endpoint.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
