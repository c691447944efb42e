package ciliumapi

import (
	"testing"

	cm "github.com/cilium/cilium/api/v1/models"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/cilium-go/cilium/pkg/api/models"
)

func TestMetrics(t *testing.T) {
	counter, histogram := dto.MetricType_COUNTER, dto.MetricType_HISTOGRAM
	label := func(k, v string) *dto.LabelPair { return &dto.LabelPair{Name: proto.String(k), Value: proto.String(v)} }
	bucket := func(le float64, n uint64) *dto.Bucket {
		return &dto.Bucket{UpperBound: proto.Float64(le), CumulativeCount: proto.Uint64(n)}
	}
	got := Metrics([]*dto.MetricFamily{
		{Name: proto.String("b_seconds"), Type: &histogram, Metric: []*dto.Metric{{Histogram: &dto.Histogram{
			SampleCount: proto.Uint64(10), Bucket: []*dto.Bucket{bucket(0.1, 5), bucket(0.5, 8), bucket(1, 9), bucket(5, 10)}}}}},
		{Name: proto.String("a_total"), Type: &counter, Metric: []*dto.Metric{
			{Label: []*dto.LabelPair{label("x", "2")}, Counter: &dto.Counter{Value: proto.Float64(3)}},
			{Label: []*dto.LabelPair{label("x", "1")}, Counter: &dto.Counter{Value: proto.Float64(7)}},
		}},
	})
	want := []cm.Metric{
		{Name: "a_total", Labels: map[string]string{"x": "1"}, Value: 7},
		{Name: "a_total", Labels: map[string]string{"x": "2"}, Value: 3},
		// 9 of 10 samples are at most 1s: the 90th percentile's bucket.
		{Name: "b_seconds", Labels: map[string]string{}, Value: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d metrics, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Value != want[i].Value || LabelString(got[i].Labels) != LabelString(want[i].Labels) {
			t.Errorf("[%d] = %+v, want %+v", i, *got[i], want[i])
		}
	}
}

func TestServicesRejectBadFrontends(t *testing.T) {
	for _, fe := range []string{"10.0.0.1:80", "10.0.0.1/TCP", "x:80/TCP"} {
		if _, err := Services([]models.Service{{Service: "ns/svc", Frontend: fe}}); err == nil {
			t.Errorf("frontend %q: no error", fe)
		}
	}
}

func TestBrief(t *testing.T) {
	for _, tc := range []struct {
		st   cm.StatusResponse
		want string
		ok   bool
	}{
		{cm.StatusResponse{Cilium: &cm.Status{State: cm.StatusStateOk}}, "OK", true},
		{cm.StatusResponse{Cilium: &cm.Status{State: cm.StatusStateWarning, Msg: "ipcache: full"},
			Kubernetes: &cm.K8sStatus{State: cm.K8sStatusStateDisabled}}, "error in cilium: ipcache: full", false},
		{cm.StatusResponse{Cilium: &cm.Status{State: cm.StatusStateWarning, Msg: "x"},
			Kubernetes: &cm.K8sStatus{State: cm.K8sStatusStateFailure, Msg: "gone"}}, "error in kubernetes: gone", false},
	} {
		if got, ok := Brief(&tc.st); got != tc.want || ok != tc.ok {
			t.Errorf("Brief = %q %v, want %q %v", got, ok, tc.want, tc.ok)
		}
	}
}
