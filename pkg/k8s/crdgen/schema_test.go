package crdgen

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

type inner struct {
	A string `json:"a"`
	B *int   `json:"b,omitempty"`
}

type sample struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	inner             `json:",inline"`
	When              metav1.Time         `json:"when,omitempty"`
	Tags              map[string][]string `json:"tags,omitempty"`
	Skip              string              `json:"-"`
	Data              []byte              `json:"data,omitempty"`
	Port              uint16              `json:"port"`
	Opt               *inner              `json:"opt"`
}

func TestReflector(t *testing.T) {
	s, err := DefaultReflector().TopLevel(reflect.TypeFor[sample]())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"a", "apiVersion", "b", "data", "kind", "metadata", "opt", "port", "tags", "when"}
	if !slices.Equal(names, want) {
		t.Fatalf("properties %v, want %v", names, want)
	}
	// Required: fields always encoded (no omitempty, not pointers).
	if !slices.Equal(s.Required, []string{"a", "port"}) {
		t.Errorf("required %v", s.Required)
	}
	if p := s.Properties["when"]; p.Type != "string" || p.Format != "date-time" {
		t.Errorf("time: %+v", p)
	}
	if p := s.Properties["tags"]; p.AdditionalProperties.Schema.Type != "array" {
		t.Errorf("map of slices: %+v", p)
	}
	if p := s.Properties["data"]; p.Type != "string" || p.Format != "byte" {
		t.Errorf("bytes: %+v", p)
	}
	if _, err := DefaultReflector().TopLevel(reflect.TypeFor[struct {
		M map[int]string `json:"m"`
	}]()); err == nil {
		t.Error("map with int keys accepted")
	}
}

func TestBuildEveryKind(t *testing.T) {
	for _, k := range Kinds {
		crd, err := Build(DefaultReflector(), k)
		if err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		if crd.Name != k.Plural+".cilium.io" || crd.Spec.Names.ListKind != k.Kind+"List" {
			t.Errorf("%s: names %+v", k.Kind, crd.Spec.Names)
		}
	}
}

// structuralCNP is the schema of the CiliumNetworkPolicy CRD as the API
// server reads it; the test fails unless it is structural.
func structuralCNP(t *testing.T) *schema.Structural {
	t.Helper()
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
	return s
}
