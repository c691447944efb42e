// Package apply applies multi-document Kubernetes YAML with server-side apply, the way
// `kubectl apply --server-side` does, so the lab can install its add-ons idempotently.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager names the lab as the owner of the fields it applies.
const FieldManager = "cilium-lab"

// Decode splits YAML documents into objects; empty documents are skipped.
func Decode(docs []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: kind and metadata.name are required", i)
		}
		out = append(out, u)
	}
}

// Applier applies objects to one cluster.
type Applier struct {
	dyn     dynamic.Interface
	mapper  meta.ResettableRESTMapper
	manager string
}

// New returns an Applier for the cluster behind cfg that owns what it
// applies as fieldManager (FieldManager for the lab itself).
func New(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		manager: fieldManager}, nil
}

// Apply applies every document in order.
func (a *Applier) Apply(ctx context.Context, docs []byte) error {
	objs, err := Decode(docs)
	if err != nil {
		return err
	}
	return a.ApplyObjects(ctx, objs)
}

// ApplyObjects applies decoded objects in order.
func (a *Applier) ApplyObjects(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := a.ApplyObject(ctx, u, false); err != nil {
			return err
		}
	}
	return nil
}

// ApplyObject applies one object, or only checks it with a server-side dry
// run. Validation is strict: an unknown or duplicate field is an error,
// not a warning the lab would never read.
func (a *Applier) ApplyObject(ctx context.Context, u *unstructured.Unstructured, dryRun bool) error {
	if err := a.applyObject(ctx, u, dryRun); err != nil {
		return fmt.Errorf("apply %s %s/%s (dry run %v): %w", u.GetKind(), u.GetNamespace(), u.GetName(), dryRun, err)
	}
	return nil
}

func (a *Applier) applyObject(ctx context.Context, u *unstructured.Unstructured, dryRun bool) error {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A kind installed a moment ago (a CRD) is unknown to a stale cache.
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := u.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: a.manager, FieldValidation: "Strict", Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
	return err
}
