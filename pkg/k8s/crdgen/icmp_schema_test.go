package crdgen

import (
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// An ICMP type is an int-or-string, so that the API server takes the
// connectivity suite's "type: 8" (and names), and an ICMP family defaults
// to IPv4; the schema stays structural.
func TestCNPSchemaTakesICMPTypesAsNumbersOrNames(t *testing.T) {
	var cnp Kind
	for _, k := range Kinds {
		if k.Kind == v2.CNPKindDefinition {
			cnp = k
		}
	}
	crd, err := Build(DefaultReflector(), cnp)
	if err != nil {
		t.Fatal(err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := schema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	if errs := schema.ValidateStructural(field.NewPath("schema"), s); len(errs) > 0 {
		t.Fatalf("not structural: %v", errs)
	}
	icmp := s.Properties["spec"].Properties["ingress"].Items.Properties["icmps"].Items.Properties["fields"].Items
	if typ := icmp.Properties["type"]; !typ.XIntOrString || typ.Type != "" {
		t.Errorf("type: %+v, want int-or-string", typ)
	}
	if fam := icmp.Properties["family"]; fam.Default.Object != "IPv4" {
		t.Errorf("family default %v, want IPv4", fam.Default.Object)
	}
}
