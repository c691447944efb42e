package filters

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// A selector is a label selector as Hubble's --label takes it: terms
// joined by commas, each key, !key, key=value (or ==), key!=value,
// key in (v1,v2) or key notin (v1,v2). A key may name its source
// (k8s:app); without one it matches a label of any source.
type selector []term

type term struct {
	source, key string
	op          string // exists, !exists, in, notin
	values      []string
}

func parseSelector(s string) (selector, error) {
	var sel selector
	for _, raw := range splitTerms(s) {
		t, err := parseTerm(strings.TrimSpace(raw))
		if err != nil {
			return nil, err
		}
		sel = append(sel, t)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("empty selector")
	}
	return sel, nil
}

// splitTerms splits at the commas outside parentheses.
func splitTerms(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func parseTerm(s string) (term, error) {
	var t term
	switch {
	case s == "":
		return t, fmt.Errorf("an empty term")
	case strings.HasPrefix(s, "!"):
		t.op, t.key = "!exists", strings.TrimSpace(s[1:])
	case strings.Contains(s, "!="):
		k, v, _ := strings.Cut(s, "!=")
		t.op, t.key, t.values = "notin", strings.TrimSpace(k), []string{strings.TrimSpace(v)}
	case strings.Contains(s, "="):
		k, v, _ := strings.Cut(s, "=")
		t.op, t.key, t.values = "in", strings.TrimSpace(k), []string{strings.TrimSpace(strings.TrimPrefix(v, "="))}
	default:
		if k, rest, ok := strings.Cut(s, " "); ok {
			op, list, _ := strings.Cut(strings.TrimSpace(rest), " ")
			list = strings.TrimSpace(list)
			if (op != "in" && op != "notin") || !strings.HasPrefix(list, "(") || !strings.HasSuffix(list, ")") {
				return t, fmt.Errorf("term %q: want key, !key, key=value, key!=value, key in (...) or key notin (...)", s)
			}
			t.op, t.key = op, k
			for _, v := range strings.Split(list[1:len(list)-1], ",") {
				t.values = append(t.values, strings.TrimSpace(v))
			}
		} else {
			t.op, t.key = "exists", s
		}
	}
	if t.key == "" {
		return t, fmt.Errorf("term %q has no key", s)
	}
	if src, key, ok := strings.Cut(t.key, ":"); ok {
		t.source, t.key = src, key
	}
	return t, nil
}

// matches says whether labels (source:key=value strings) satisfy every
// term.
func (sel selector) matches(labels []string) bool {
	for _, t := range sel {
		var values []string
		for _, l := range labels {
			src, kv, _ := strings.Cut(l, ":")
			k, v, _ := strings.Cut(kv, "=")
			if k == t.key && (t.source == "" || t.source == "any" || t.source == src) {
				values = append(values, v)
			}
		}
		var ok bool
		switch t.op {
		case "exists":
			ok = len(values) > 0
		case "!exists":
			ok = len(values) == 0
		case "in":
			ok = slices.ContainsFunc(values, func(v string) bool { return slices.Contains(t.values, v) })
		case "notin":
			ok = !slices.ContainsFunc(values, func(v string) bool { return slices.Contains(t.values, v) })
		}
		if !ok {
			return false
		}
	}
	return true
}

// labelFilters: source_label and destination_label, selectors on the
// identity's labels; a side matches when any of its selectors does.
func labelFilters(ff *flow.FlowFilter) ([]Func, error) {
	var out []Func
	for _, side := range []struct {
		name      string
		selectors []string
		get       func(*flow.Flow) []string
	}{{"source_label", ff.GetSourceLabel(), func(f *flow.Flow) []string { return f.GetSource().GetLabels() }},
		{"destination_label", ff.GetDestinationLabel(), func(f *flow.Flow) []string { return f.GetDestination().GetLabels() }}} {
		fs, err := when(side.selectors, func(selectors []string) (Func, error) {
			var sels []selector
			for _, s := range selectors {
				sel, err := parseSelector(s)
				if err != nil {
					return nil, fmt.Errorf("%s %q: %w", side.name, s, err)
				}
				sels = append(sels, sel)
			}
			return func(f *flow.Flow) bool {
				ls := side.get(f)
				return slices.ContainsFunc(sels, func(s selector) bool { return s.matches(ls) })
			}, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}
