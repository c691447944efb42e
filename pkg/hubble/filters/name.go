package filters

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
)

// nameFilters: source_pod, destination_pod, source_service and
// destination_service, each a namespace and a name prefix.
func nameFilters(ff *flow.FlowFilter) ([]Func, error) {
	var out []Func
	for _, side := range []struct {
		name  string
		names []string
		get   func(*flow.Flow) (ns, name string)
	}{
		{"source_pod", ff.GetSourcePod(), func(f *flow.Flow) (string, string) {
			return f.GetSource().GetNamespace(), f.GetSource().GetPodName()
		}},
		{"destination_pod", ff.GetDestinationPod(), func(f *flow.Flow) (string, string) {
			return f.GetDestination().GetNamespace(), f.GetDestination().GetPodName()
		}},
		{"source_service", ff.GetSourceService(), func(f *flow.Flow) (string, string) {
			return f.GetSourceService().GetNamespace(), f.GetSourceService().GetName()
		}},
		{"destination_service", ff.GetDestinationService(), func(f *flow.Flow) (string, string) {
			return f.GetDestinationService().GetNamespace(), f.GetDestinationService().GetName()
		}},
	} {
		fs, err := when(side.names, func(names []string) (Func, error) {
			m, err := nameMatcher(side.name, names)
			return func(f *flow.Flow) bool { return m(side.get(f)) }, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// nameMatcher matches namespace/name-prefix as Hubble does: "ns/" is
// any name in ns, "/prefix" any namespace, and a bare "prefix" the
// default namespace.
func nameMatcher(field string, values []string) (func(ns, name string) bool, error) {
	type want struct{ ns, prefix string }
	var ws []want
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("%s: an empty name", field)
		}
		ns, name, found := strings.Cut(v, "/")
		if !found {
			ns, name = "default", v
		}
		ws = append(ws, want{ns, name})
	}
	return func(ns, name string) bool {
		if ns == "" && name == "" {
			return false
		}
		return slices.ContainsFunc(ws, func(w want) bool {
			return (w.ns == "" || w.ns == ns) && strings.HasPrefix(name, w.prefix)
		})
	}, nil
}
