// Package crdgen builds CustomResourceDefinitions with structural OpenAPI v3
// schemas for Cilium's kinds by reflecting over their Go types, so the schemas
// cannot drift from the types. hack/crdgen writes them to
// install/kubernetes/crds when `make generate` runs.
package crdgen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Override replaces the reflected schema of a Go type (enums, formats, raw JSON).
type Override func() apiextensionsv1.JSONSchemaProps

var (
	timeType   = reflect.TypeFor[metav1.Time]()
	rawMsgType = reflect.TypeFor[json.RawMessage]()
	objectMeta = reflect.TypeFor[metav1.ObjectMeta]()
	typeMeta   = reflect.TypeFor[metav1.TypeMeta]()
)

// Refinement adds limits (lengths, patterns) to the reflected schema of a
// struct type, keeping the rest as reflected; it fails when the schema has
// no property it limits, so that renaming a field cannot drop a limit.
type Refinement func(*apiextensionsv1.JSONSchemaProps) error

// Reflector turns Go types into schemas.
type Reflector struct {
	Overrides   map[reflect.Type]Override
	Refinements map[reflect.Type]Refinement
}

// TopLevel returns the schema of a kind's object: apiVersion, kind, metadata
// and the type's own fields.
func (r *Reflector) TopLevel(t reflect.Type) (*apiextensionsv1.JSONSchemaProps, error) {
	s, err := r.schema(t, t.String())
	if err != nil {
		return nil, err
	}
	s.Properties["apiVersion"] = apiextensionsv1.JSONSchemaProps{Type: "string",
		Description: "APIVersion defines the versioned schema of this representation of an object."}
	s.Properties["kind"] = apiextensionsv1.JSONSchemaProps{Type: "string",
		Description: "Kind is a string value representing the REST resource this object represents."}
	s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	s.Required = without(s.Required, "metadata")
	return s, nil
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

func (r *Reflector) schema(t reflect.Type, path string) (*apiextensionsv1.JSONSchemaProps, error) {
	if o, ok := r.Overrides[t]; ok {
		s := o()
		return &s, nil
	}
	switch t {
	case timeType:
		return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}, nil
	case rawMsgType:
		return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return r.schema(t.Elem(), path)
	case reflect.String:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}, nil
	case reflect.Bool:
		return &apiextensionsv1.JSONSchemaProps{Type: "boolean"}, nil
	case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte"}, nil
		}
		items, err := r.schema(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map key %s is not a string", path, t.Key())
		}
		v, err := r.schema(t.Elem(), path+"{}")
		if err != nil {
			return nil, err
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "object",
			AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: v}}, nil
	case reflect.Struct:
		s := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		if err := r.fields(t, path, s); err != nil {
			return nil, err
		}
		if refine, ok := r.Refinements[t]; ok {
			if err := refine(s); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: no schema for kind %s", path, t.Kind())
}

// fields adds t's JSON fields to s, flattening embedded (inline) structs.
// Fields without omitempty/omitzero are required, as in Go's JSON encoding
// they are always present.
func (r *Reflector) fields(t reflect.Type, path string, s *apiextensionsv1.JSONSchemaProps) error {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == typeMeta || f.Type == objectMeta {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if err := r.fields(ft, path, s); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs, err := r.schema(f.Type, path+"."+name)
		if err != nil {
			return err
		}
		s.Properties[name] = *fs
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if !optional && f.Type.Kind() != reflect.Pointer {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
