package api

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// DecodeRule reads one rule from YAML or JSON, rejecting unknown fields, and
// validates it. Errors name the offending field under "spec".
func DecodeRule(data []byte) (*Rule, error) {
	var r Rule
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return nil, fmt.Errorf("decode rule: %w", err)
	}
	if errs := r.Validate(field.NewPath("spec")); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &r, nil
}
