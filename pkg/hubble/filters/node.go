package filters

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// nodeNameFilter: node_name, patterns with wildcards.
func nodeNameFilter(ff *flow.FlowFilter) ([]Func, error) {
	return when(ff.GetNodeName(), func(v []string) (Func, error) {
		for _, p := range v {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("node_name %q: %w", p, err)
			}
		}
		return func(f *flow.Flow) bool {
			return slices.ContainsFunc(v, func(p string) bool { return nodeMatches(p, f.GetNodeName()) })
		}, nil
	})
}

// nodeMatches matches a node name against a pattern with wildcards; a
// pattern of the cluster/node form matches the node part (cilium-go has
// one cluster).
func nodeMatches(pattern, node string) bool {
	if _, p, ok := strings.Cut(pattern, "/"); ok {
		pattern = p
	}
	ok, _ := path.Match(pattern, node)
	return ok
}

// nodeLabelFilter: node_labels, label selectors on the node's labels,
// which flows carry only when the agent knows them.
func nodeLabelFilter(ff *flow.FlowFilter) ([]Func, error) {
	return when(ff.GetNodeLabels(), nodeLabels)
}

func nodeLabels(values []string) (Func, error) {
	var sels []selector
	for _, v := range values {
		sel, err := parseSelector(v)
		if err != nil {
			return nil, fmt.Errorf("node_labels %q: %w", v, err)
		}
		sels = append(sels, sel)
	}
	return func(f *flow.Flow) bool {
		ls := f.GetNodeLabels()
		return len(ls) > 0 && slices.ContainsFunc(sels, func(s selector) bool { return s.matches(ls) })
	}, nil
}
