package allocator

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
)

// PodIdentities gives endpoints the identity of their pod's security
// labels; it is the endpoint.IdentityAllocator when Kubernetes is on.
type PodIdentities struct {
	kube   kubernetes.Interface
	ids    identity.IdentityAllocator
	filter *labels.Filter
	// cluster is the agent's --cluster-name, which every pod's identity
	// carries: the agent's word, never the pod's.
	cluster string

	mu    sync.Mutex
	byPod map[endpoint.Pod]*identity.Identity
}

var _ endpoint.IdentityAllocator = (*PodIdentities)(nil)

// NewPodIdentities resolves labels through kube and allocates with ids;
// cluster is the cluster's name.
func NewPodIdentities(kube kubernetes.Interface, ids identity.IdentityAllocator, filter *labels.Filter, cluster string) *PodIdentities {
	return &PodIdentities{kube: kube, ids: ids, filter: filter, cluster: cluster, byPod: map[endpoint.Pod]*identity.Identity{}}
}

// securityLabels are the identity labels of a pod in this cluster.
func (a *PodIdentities) securityLabels(in labels.PodInput) labels.Labels {
	in.Cluster = a.cluster
	return a.filter.SecurityLabels(in)
}

// PodLabels reads what Kubernetes says about the pod that bears on its
// identity: its labels, its namespace's labels and its service account.
func PodLabels(ctx context.Context, kube kubernetes.Interface, pod endpoint.Pod) (labels.PodInput, error) {
	p, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return labels.PodInput{}, fmt.Errorf("get pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{})
	if err != nil {
		return labels.PodInput{}, fmt.Errorf("get namespace %s: %w", pod.Namespace, err)
	}
	return labels.PodInput{
		PodLabels:       p.Labels,
		Namespace:       p.Namespace,
		NamespaceLabels: ns.Labels,
		ServiceAccount:  p.Spec.ServiceAccountName,
	}, nil
}

// Allocate implements endpoint.IdentityAllocator. An endpoint without a
// pod name (a CNI call outside Kubernetes) keeps the init identity.
func (a *PodIdentities) Allocate(ctx context.Context, pod endpoint.Pod) (identity.NumericIdentity, error) {
	if pod.Name == "" || pod.Namespace == "" {
		return identity.Init, nil
	}
	in, err := PodLabels(ctx, a.kube, pod)
	if err != nil {
		return 0, err
	}
	id, _, err := a.ids.Allocate(ctx, a.securityLabels(in))
	if err != nil {
		return 0, fmt.Errorf("identity of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	a.mu.Lock()
	old := a.byPod[pod]
	a.byPod[pod] = id
	a.mu.Unlock()
	if old != nil {
		// A re-ADD of the same pod replaces its endpoint; keep one
		// reference per pod.
		a.ids.Release(old)
	}
	return id.ID, nil
}

// Release implements endpoint.IdentityAllocator.
func (a *PodIdentities) Release(_ context.Context, pod endpoint.Pod, num identity.NumericIdentity) error {
	a.mu.Lock()
	id, ok := a.byPod[pod]
	if ok && id.ID == num {
		delete(a.byPod, pod)
	}
	a.mu.Unlock()
	if ok && id.ID == num {
		a.ids.Release(id)
	}
	return nil
}

// Identity returns the identity, with its labels, given to pod.
// A nil PodIdentities (the agent without Kubernetes) gives none.
func (a *PodIdentities) Identity(pod endpoint.Pod) (*identity.Identity, bool) {
	if a == nil {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.byPod[pod]
	return id, ok
}
