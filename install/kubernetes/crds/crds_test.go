package crds

import (
	"fmt"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestAllCRDs(t *testing.T) {
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]apiextensionsv1.ResourceScope{
		"ciliumnetworkpolicies.cilium.io":            apiextensionsv1.NamespaceScoped,
		"ciliumclusterwidenetworkpolicies.cilium.io": apiextensionsv1.ClusterScoped,
		"ciliumidentities.cilium.io":                 apiextensionsv1.ClusterScoped,
		"ciliumendpoints.cilium.io":                  apiextensionsv1.NamespaceScoped,
		"ciliumnodes.cilium.io":                      apiextensionsv1.ClusterScoped,
		"ciliumendpointslices.cilium.io":             apiextensionsv1.ClusterScoped,
		"ciliumcidrgroups.cilium.io":                 apiextensionsv1.ClusterScoped,
		"ciliumloadbalancerippools.cilium.io":        apiextensionsv1.ClusterScoped,
		"ciliuml2announcementpolicies.cilium.io":     apiextensionsv1.ClusterScoped,
	}
	if len(crds) != len(want) {
		t.Fatalf("%d CRDs, want %d", len(crds), len(want))
	}
	for _, c := range crds {
		scope, ok := want[c.Name]
		if !ok || c.Spec.Scope != scope {
			t.Errorf("%s: scope %s, want %s", c.Name, c.Spec.Scope, scope)
		}
		if c.Spec.Group != "cilium.io" || len(c.Spec.Versions) == 0 || c.Spec.Versions[0].Schema == nil ||
			!c.Spec.Versions[0].Storage {
			t.Errorf("%s: %+v", c.Name, c.Spec)
		}
	}
	// Cilium 1.20 stores CiliumCIDRGroups as v2 and still serves
	// v2alpha1, which cilium-cli's connectivity test applies.
	ccg := crds[slices.IndexFunc(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return c.Spec.Names.Kind == "CiliumCIDRGroup"
	})]
	var versions []string
	for _, v := range ccg.Spec.Versions {
		versions = append(versions, fmt.Sprintf("%s served=%t storage=%t", v.Name, v.Served, v.Storage))
	}
	if want := []string{"v2 served=true storage=true", "v2alpha1 served=true storage=false"}; !slices.Equal(versions, want) ||
		!slices.Equal(ccg.Spec.Names.ShortNames, []string{"ccg"}) {
		t.Errorf("CiliumCIDRGroup versions %q short names %v, want %q [ccg]", versions, ccg.Spec.Names.ShortNames, want)
	}
	ext := ccg.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["externalCIDRs"]
	if ext.Type != "array" || ext.Items.Schema.Type != "string" {
		t.Errorf("v2alpha1 externalCIDRs schema: %+v", ext)
	}
	cnp := crds[slices.IndexFunc(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return c.Spec.Names.Kind == "CiliumNetworkPolicy"
	})]
	if !slices.Equal(cnp.Spec.Names.ShortNames, []string{"cnp", "ciliumnp"}) {
		t.Errorf("short names %v", cnp.Spec.Names.ShortNames)
	}
	spec := cnp.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	ports := spec.Properties["ingress"].Items.Schema.Properties["toPorts"].Items.Schema.Properties["ports"].Items.Schema
	if ports.Properties["endPort"].Type != "integer" || len(ports.Properties["protocol"].Enum) == 0 {
		t.Errorf("toPorts.ports schema: %+v", ports.Properties)
	}
	if _, ok := spec.Properties["ingress"].Items.Schema.Properties["fromEndpoints"]; !ok {
		t.Error("inline IngressCommonRule fields missing from the schema")
	}
	for _, dir := range []string{"egress", "egressDeny"} {
		svc := spec.Properties[dir].Items.Schema.Properties["toServices"].Items.Schema
		if _, ok := svc.Properties["k8sService"].Properties["serviceName"]; !ok {
			t.Errorf("%s.toServices schema: %+v", dir, svc.Properties)
		}
		if sel := svc.Properties["k8sServiceSelector"]; !slices.Equal(sel.Required, []string{"selector"}) {
			t.Errorf("%s.toServices.k8sServiceSelector requires %v, want the selector", dir, sel.Required)
		}
	}
}
