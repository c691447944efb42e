package crdgen

import (
	"reflect"
	"strings"
	"testing"
)

// A refinement of a property the type does not have fails the build,
// rather than leaving the limit out.
func TestRefinementOfAMissingProperty(t *testing.T) {
	type noB struct {
		A string `json:"a"`
	}
	r := &Reflector{Refinements: map[reflect.Type]Refinement{
		reflect.TypeFor[noB](): limitStrings(map[string]stringLimit{"b": {max: 1}}),
	}}
	if _, err := r.TopLevel(reflect.TypeFor[noB]()); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("err = %v, want one naming b", err)
	}
}
