package allocator

import (
	"context"
	"errors"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/k8s/agent"
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
	w   *agent.Watchers
	ids *PodIdentities
	eps *endpoint.Manager
}

// Sync refreshes the identity of every local endpoint whose labels moved.
func (r Relabeler) Sync(ctx context.Context, local []endpoint.Endpoint) error {
	var errs []error
	for _, ep := range local {
		pod := endpoint.Pod{Namespace: ep.PodNamespace, Name: ep.PodName}
		in, ok := r.w.PodInput(pod.Namespace, pod.Name)
		if !ok || !r.ids.Stale(pod, in) {
			continue
		}
		if _, err := r.eps.RefreshIdentity(ctx, ep.ContainerID); err != nil && !errors.Is(err, endpoint.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
