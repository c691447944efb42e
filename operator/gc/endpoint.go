package gc

import (
	"context"
	"errors"
	"fmt"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// CollectEndpoints deletes CiliumEndpoints whose pod is gone: no pod of the
// same namespace and name, or one with a different UID than the endpoint's
// owner reference (the pod was recreated and its endpoint is stale).
func (c *Collector) CollectEndpoints(ctx context.Context) error {
	// Endpoints first: a pod is created before its endpoint, so every
	// listed endpoint's pod, if it exists, is in the later pod list.
	eps, err := c.Clients.Cilium.CiliumV2().CiliumEndpoints("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list CiliumEndpoints: %w", err)
	}
	pods, err := c.Clients.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	live := map[types.NamespacedName]types.UID{}
	for _, p := range pods.Items {
		live[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p.UID
	}
	var errs []error
	for i := range eps.Items {
		ep := &eps.Items[i]
		uid, ok := live[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}]
		if ok && (podOwner(ep) == "" || podOwner(ep) == uid) {
			continue
		}
		// The resourceVersion precondition spares an endpoint its agent
		// rewrote for a recreated pod since the list.
		err := c.Clients.Cilium.CiliumV2().CiliumEndpoints(ep.Namespace).Delete(ctx, ep.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ep.UID, ResourceVersion: &ep.ResourceVersion}})
		switch {
		case k8serrors.IsNotFound(err) || k8serrors.IsConflict(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("delete CiliumEndpoint %s/%s: %w", ep.Namespace, ep.Name, err))
		default:
			c.Log.Info("Deleted CiliumEndpoint of a gone pod", "namespace", ep.Namespace, "name", ep.Name)
		}
	}
	return errors.Join(errs...)
}

// podOwner is the UID of the pod ep belongs to, if it says.
func podOwner(ep *v2.CiliumEndpoint) types.UID {
	for _, r := range ep.OwnerReferences {
		if r.APIVersion == "v1" && r.Kind == "Pod" {
			return r.UID
		}
	}
	return ""
}
