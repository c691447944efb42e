// Package crdinstall creates or upgrades Cilium's CustomResourceDefinitions
// when the operator becomes leader, and tells the other controllers when
// the API server serves them.
package crdinstall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/install/kubernetes/crds"
	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
)

// Cell installs the CRDs as a leader controller and provides *Installed.
var Cell = cell.Module("crd-install", "Install and upgrade the Cilium CRDs",
	cell.Provide(newInstalled, newController),
)

// Installed is closed once every CRD is established; controllers that use
// Cilium's kinds wait for it.
type Installed struct{ done chan struct{} }

func newInstalled() *Installed { return &Installed{done: make(chan struct{})} }

// Wait returns when the CRDs are established or ctx ends.
func (i *Installed) Wait(ctx context.Context) error {
	select {
	case <-i.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (i *Installed) markDone() {
	select {
	case <-i.done:
	default:
		close(i.done)
	}
}

func newController(log *slog.Logger, c k8s.Clients, inst *Installed) leader.Out {
	return leader.Out{Controller: leader.Controller{Name: "crd-install", Run: func(ctx context.Context) error {
		all, err := crds.All()
		if err != nil {
			return err
		}
		if err := Install(ctx, log, c.APIExts, all); err != nil {
			return err
		}
		inst.markDone()
		<-ctx.Done()
		return nil
	}}}
}

// Install creates each CRD or brings an existing one up to date, then waits
// until the API server has established all of them.
func Install(ctx context.Context, log *slog.Logger, c apiextclient.Interface, all []*apiextensionsv1.CustomResourceDefinition) error {
	api := c.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range all {
		want, err := withSpecHash(want)
		if err != nil {
			return err
		}
		cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case k8serrors.IsNotFound(err):
			if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create CRD %s: %w", want.Name, err)
			}
			log.Info("Created CRD", "name", want.Name)
		case err != nil:
			return fmt.Errorf("get CRD %s: %w", want.Name, err)
		case cur.Annotations[SpecHashAnnotation] != want.Annotations[SpecHashAnnotation]:
			upd := cur.DeepCopy()
			upd.Spec = want.Spec
			upd.Labels = merge(upd.Labels, want.Labels)
			upd.Annotations = merge(upd.Annotations, want.Annotations)
			if _, err := api.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update CRD %s: %w", want.Name, err)
			}
			log.Info("Updated CRD", "name", want.Name)
		}
	}
	for _, want := range all {
		if err := waitEstablished(ctx, c, want.Name); err != nil {
			return err
		}
	}
	return nil
}

// SpecHashAnnotation records the hash of the spec the operator wrote. The
// API server fills defaults into a CRD's spec, so comparing specs would
// find every CRD changed on each start; the hash changes only with ours.
const SpecHashAnnotation = "cilium.io/crd-spec-hash"

func withSpecHash(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	b, err := json.Marshal(crd.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode CRD %s: %w", crd.Name, err)
	}
	sum := sha256.Sum256(b)
	out := crd.DeepCopy()
	out.Annotations = merge(out.Annotations, map[string]string{SpecHashAnnotation: hex.EncodeToString(sum[:16])})
	return out, nil
}

func merge(into, from map[string]string) map[string]string {
	if into == nil && len(from) > 0 {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

// waitEstablished polls rather than watches: it is a handful of objects,
// once per leadership.
func waitEstablished(ctx context.Context, c apiextclient.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil && Established(crd) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// Established says whether the API server serves crd's kind.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
