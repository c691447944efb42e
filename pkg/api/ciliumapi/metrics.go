package ciliumapi

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	cm "github.com/cilium/cilium/api/v1/models"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the samples of families in Cilium's Metric model, sorted by
// name and labels. A histogram's value is its 90th percentile, the upper
// bound of the first bucket that holds 90% of the samples, as Cilium
// reports histograms by p90; a summary has no value (0), as in Cilium.
func Metrics(families []*dto.MetricFamily) []*cm.Metric {
	out := []*cm.Metric{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, &cm.Metric{Name: f.GetName(), Labels: labels, Value: value(f.GetType(), m)})
		}
	}
	slices.SortStableFunc(out, func(a, b *cm.Metric) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(LabelString(a.Labels), LabelString(b.Labels)))
	})
	return out
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue()
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		want := 0.9 * float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			if h.GetSampleCount() > 0 && float64(b.GetCumulativeCount()) >= want {
				return b.GetUpperBound()
			}
		}
	}
	return 0
}

// LabelString is labels as k=v pairs sorted by name, space-separated:
// what a metrics pattern matches after the name, and what tables show.
func LabelString(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, " ")
}
