package api

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/labels"
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

// selectorKey splits a selector key into its label source and label key. A
// key without a source ("app") matches any source.
func selectorKey(k string) (source, key string) {
	if src, rest, ok := strings.Cut(k, ":"); ok {
		return src, rest
	}
	return labels.SourceAny, k
}

// lookup returns the value of the label selected by selector key k.
func lookup(ls labels.Labels, k string) (string, bool) {
	src, key := selectorKey(k)
	l, ok := ls[key]
	if !ok || (src != labels.SourceAny && src != l.Source) {
		return "", false
	}
	return l.Value, true
}

// Matches reports whether an endpoint with labels ls is selected. A nil
// selector selects nothing; an empty one selects everything.
func (s *EndpointSelector) Matches(ls labels.Labels) bool {
	if s == nil {
		return false
	}
	for k, want := range s.MatchLabels {
		if v, ok := lookup(ls, k); !ok || v != want {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		v, ok := lookup(ls, e.Key)
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if ok && slices.Contains(e.Values, v) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !ok {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false // unknown operators select nothing; Validate reports them
		}
	}
	return true
}
