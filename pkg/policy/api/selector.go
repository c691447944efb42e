package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointSelector selects endpoints by their labels. Keys may carry a label
// source ("k8s:app", "any:app", "reserved:host"); without one they match any
// source. An empty selector ({}) selects every endpoint.
type EndpointSelector struct {
	MatchLabels      map[string]string                 `json:"matchLabels,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// IsWildcard reports whether s selects everything.
func (s *EndpointSelector) IsWildcard() bool {
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}
