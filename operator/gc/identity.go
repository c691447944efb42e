package gc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// UnusedSinceAnnotation marks when the collector first saw an identity
// unused. It lives on the object, not in memory, so a new leader keeps
// counting the grace period instead of starting it over.
const UnusedSinceAnnotation = "cilium.io/unused-since"

// CollectIdentities annotates newly unused identities, clears the mark of
// those in use again and deletes those unused for the grace period.
func (c *Collector) CollectIdentities(ctx context.Context) error {
	cs := c.Clients.Cilium.CiliumV2()
	eps, err := cs.CiliumEndpoints("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list CiliumEndpoints: %w", err)
	}
	used := map[string]bool{}
	for _, ep := range eps.Items {
		if id := ep.Status.Identity; id != nil {
			used[strconv.FormatInt(id.ID, 10)] = true
		}
	}
	ids, err := cs.CiliumIdentities().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list CiliumIdentities: %w", err)
	}
	now := c.Now()
	var errs []error
	for i := range ids.Items {
		if err := c.collectIdentity(ctx, &ids.Items[i], used[ids.Items[i].Name], now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Collector) collectIdentity(ctx context.Context, id *v2.CiliumIdentity, used bool, now time.Time) error {
	api := c.Clients.Cilium.CiliumV2().CiliumIdentities()
	mark, marked := id.Annotations[UnusedSinceAnnotation]
	since, perr := time.Parse(time.RFC3339, mark)
	switch {
	case used && !marked:
		return nil
	case used:
		upd := id.DeepCopy()
		delete(upd.Annotations, UnusedSinceAnnotation)
		return c.update(ctx, upd)
	case !marked || perr != nil:
		upd := id.DeepCopy()
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[UnusedSinceAnnotation] = now.UTC().Format(time.RFC3339)
		return c.update(ctx, upd)
	case now.Sub(since) < c.Grace:
		return nil
	}
	// The resourceVersion precondition spares an identity an agent touched
	// since the list.
	err := api.Delete(ctx, id.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
		UID: &id.UID, ResourceVersion: &id.ResourceVersion}})
	switch {
	case k8serrors.IsNotFound(err) || k8serrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete CiliumIdentity %s: %w", id.Name, err)
	}
	c.Log.Info("Deleted unused identity", "identity", id.Name, "unused-since", mark)
	return nil
}

func (c *Collector) update(ctx context.Context, id *v2.CiliumIdentity) error {
	_, err := c.Clients.Cilium.CiliumV2().CiliumIdentities().Update(ctx, id, metav1.UpdateOptions{})
	switch {
	case k8serrors.IsNotFound(err) || k8serrors.IsConflict(err):
		return nil // changed under us; the next pass sees the new state
	case err != nil:
		return fmt.Errorf("annotate CiliumIdentity %s: %w", id.Name, err)
	}
	return nil
}
