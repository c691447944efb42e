package filters

import (
	"fmt"
	"slices"

	"github.com/cilium/cilium/api/v1/flow"
)

// clusterFilters: source_cluster_name and destination_cluster_name.
func clusterFilters(ff *flow.FlowFilter) ([]Func, error) {
	src, err := when(ff.GetSourceClusterName(), func(v []string) (Func, error) {
		return clusterName("source_cluster_name", v, func(f *flow.Flow) string { return f.GetSource().GetClusterName() })
	})
	if err != nil {
		return nil, err
	}
	dst, err := when(ff.GetDestinationClusterName(), func(v []string) (Func, error) {
		return clusterName("destination_cluster_name", v, func(f *flow.Flow) string { return f.GetDestination().GetClusterName() })
	})
	if err != nil {
		return nil, err
	}
	return append(src, dst...), nil
}

func clusterName(field string, names []string, get func(*flow.Flow) string) (Func, error) {
	if slices.Contains(names, "") {
		return nil, fmt.Errorf("%s: an empty name", field)
	}
	return func(f *flow.Flow) bool { return slices.Contains(names, get(f)) }, nil
}
