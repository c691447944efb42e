package ui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Cluster is what the page reads from the API server: the namespaces to
// pick from and the policies its flows name. Read-only.
type Cluster struct {
	client dynamic.Interface
}

// NewCluster reads through client.
func NewCluster(client dynamic.Interface) *Cluster { return &Cluster{client: client} }

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// policyKinds are the kinds a flow's policy names (flow.Policy.kind), by
// the resource that holds them; a cluster-wide kind has no namespace.
var policyKinds = map[string]struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	"NetworkPolicy": {schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, true},
	"CiliumNetworkPolicy": {
		schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnetworkpolicies"}, true},
	"CiliumClusterwideNetworkPolicy": {
		schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumclusterwidenetworkpolicies"}, false},
}

// Namespaces lists the cluster's namespaces by name.
func (c *Cluster) Namespaces(ctx context.Context) ([]string, error) {
	list, err := c.client.Resource(namespaces).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	out := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, ns.GetName())
	}
	slices.Sort(out)
	return out, nil
}

// PolicyRef names a policy as a flow does.
type PolicyRef struct {
	Kind, Namespace, Name string
}

// ParsePolicyRef reads kind, namespace and name and names every bad one.
func ParsePolicyRef(v url.Values) (PolicyRef, error) {
	r := PolicyRef{Kind: v.Get("kind"), Namespace: v.Get("namespace"), Name: v.Get("name")}
	var errs []error
	k, ok := policyKinds[r.Kind]
	if !ok {
		errs = append(errs, fmt.Errorf("kind %q: want NetworkPolicy, CiliumNetworkPolicy or CiliumClusterwideNetworkPolicy", r.Kind))
	}
	switch {
	case ok && k.namespaced:
		if msgs := validation.IsDNS1123Label(r.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace %q: %s", r.Namespace, msgs[0]))
		}
	case ok && r.Namespace != "":
		errs = append(errs, fmt.Errorf("namespace %q: a %s has none", r.Namespace, r.Kind))
	}
	if msgs := validation.IsDNS1123Subdomain(r.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %q: %s", r.Name, msgs[0]))
	}
	return r, errors.Join(errs...)
}

// PolicyYAML is the policy as YAML, without the fields the API server
// keeps for itself (managedFields).
func (c *Cluster) PolicyYAML(ctx context.Context, r PolicyRef) ([]byte, error) {
	k := policyKinds[r.Kind]
	obj, err := c.client.Resource(k.gvr).Namespace(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", r.Kind, r.path(), err)
	}
	obj.SetManagedFields(nil)
	return yaml.Marshal(obj.Object)
}

func (r PolicyRef) path() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}
