// Package kubernetes holds what installs cilium-go on a cluster with
// `kubectl apply -k install/kubernetes` (or `kubectl apply -R -f`): the
// agent's and the operator's RBAC, their configuration (cilium-config,
// read through ApplyConfigDir), the agent's DaemonSet, the operator's
// Deployment, hubble-relay and hubble-ui. The CRDs are in the
// crds package. The manifests are embedded so that the commands' tests can
// run the flags the manifests pass through the real flag sets.
package kubernetes

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml Kustomization
var files embed.FS

// Files returns the manifests (without the CRDs) and the Kustomization.
func Files() fs.FS { return files }

// Kustomization is the file that lists what `kubectl apply -k` applies.
// kustomize accepts this name too; kubectl apply -R -f skips it for its
// lack of a .yaml extension, so both ways of installing work.
const Kustomization = "Kustomization"

// Objects decodes every manifest but the CRDs, in the order the
// kustomization lists them, strictly: an unknown or duplicate field is an
// error naming the file.
func Objects() ([]runtime.Object, error) {
	names, err := Resources()
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, n := range names {
		if path.Dir(n) != "." {
			continue // crds/: decoded by the crds package
		}
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		objs, err := decode(n, data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// decode decodes every document of the file name holding data.
func decode(name string, data []byte) ([]runtime.Object, error) {
	docs, err := documents(name, data)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i, doc := range docs {
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode %s document %d: %w", name, i+1, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// Object returns the object of type T called name among Objects.
func Object[T runtime.Object](name string) (T, error) {
	var zero T
	objs, err := Objects()
	if err != nil {
		return zero, err
	}
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			continue
		}
		if m, ok := o.(interface{ GetName() string }); ok && m.GetName() == name {
			return t, nil
		}
	}
	return zero, fmt.Errorf("no %T named %s in the manifests", zero, name)
}

// Resources are the files the kustomization lists, paths relative to
// this directory; the CRDs are under crds/.
func Resources() ([]string, error) {
	data, err := files.ReadFile(Kustomization)
	if err != nil {
		return nil, err
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("decode %s: %w", Kustomization, err)
	}
	if len(k.Resources) == 0 || slices.Contains(k.Resources, "") {
		return nil, fmt.Errorf("%s: empty resource list or entry", Kustomization)
	}
	return k.Resources, nil
}

// documents splits a file into its YAML documents, leaving out those that
// hold only comments.
func documents(name string, data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		if len(m) > 0 {
			out = append(out, doc)
		}
	}
}
