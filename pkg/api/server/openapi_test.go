package server

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	apiv1 "github.com/cilium-go/cilium/api/v1"
	"github.com/cilium-go/cilium/pkg/api/models"
)

type openAPIDoc struct {
	Paths      map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]any `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func loadDoc(t *testing.T) openAPIDoc {
	var doc openAPIDoc
	if err := yaml.Unmarshal(apiv1.OpenAPI, &doc); err != nil {
		t.Fatalf("api/v1/openapi.yaml: %v", err)
	}
	return doc
}

// TestRoutesMatchOpenAPI: the server serves exactly the operations the
// document describes.
func TestRoutesMatchOpenAPI(t *testing.T) {
	doc := loadDoc(t)
	var inDoc, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				inDoc = append(inDoc, strings.ToUpper(method)+" /v1"+path)
			}
		}
	}
	for _, r := range routes {
		served = append(served, r.method+" "+r.path)
	}
	slices.Sort(inDoc)
	slices.Sort(served)
	if !slices.Equal(inDoc, served) {
		t.Fatalf("document has\n  %v\nserver has\n  %v", inDoc, served)
	}
}

// TestModelsMatchOpenAPI: every schema lists exactly its model's JSON
// fields.
func TestModelsMatchOpenAPI(t *testing.T) {
	doc := loadDoc(t)
	for name, v := range map[string]any{
		"Error": models.Error{}, "ModuleHealth": models.ModuleHealth{}, "Health": models.Health{},
		"Config": models.Config{}, "ConfigPatch": models.ConfigPatch{}, "IPAMRequest": models.IPAMRequest{},
		"IPAMResponse": models.IPAMResponse{}, "IPAMAllocation": models.IPAMAllocation{}, "EndpointRequest": models.EndpointRequest{},
		"Endpoint": models.Endpoint{}, "Identity": models.Identity{}, "BPFMap": models.BPFMap{},
		"IPCacheEntry": models.IPCacheEntry{}, "DNSLookup": models.DNSLookup{}, "Node": models.Node{}, "Service": models.Service{},
		"ServiceBackend": models.ServiceBackend{}, "PolicyOrigin": models.PolicyOrigin{}, "Policy": models.Policy{}, "PolicyRule": models.PolicyRule{},
		"PolicySelector": models.PolicySelector{}, "EndpointPolicy": models.EndpointPolicy{}, "PolicyEntry": models.PolicyEntry{},
		"PolicyTrace": models.PolicyTrace{}, "TracePeer": models.TracePeer{}, "PolicyVerdict": models.PolicyVerdict{},
		"MonitorEvent": models.MonitorEvent{},
	} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s missing", name)
			continue
		}
		var fields, props []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			fields = append(fields, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		for p := range schema.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("schema %s has %v, model has %v", name, props, fields)
		}
	}
	if len(doc.Components.Schemas) != 27 {
		t.Errorf("%d schemas, the test knows 27", len(doc.Components.Schemas))
	}
}
