package main

import (
	"strings"
	"testing"
	"time"
)

// crrSeries is a measurement whose p50 and p99 are p, repetition by
// repetition.
func crrSeries(p ...float64) *series {
	return &series{p50: p, p99: p, rate: []float64{1000, 1000, 1000}}
}

// TestReport: the report judges the scale ratio as an upper bound on
// latency, the stream as a lower bound on throughput and the change
// latency by its p99's interval, and says what it does not measure.
func TestReport(t *testing.T) {
	o := options{reps: 3, duration: time.Second, scales: []int{10, 10000}, sockScales: []int{10},
		parts: "crr,sock,stream,cp"}
	dp := &dpResults{crr: map[crrKey]*series{
		{podTC, 10}:    crrSeries(100, 110, 90),
		{cipTC, 10}:    crrSeries(100, 110, 90),
		{podTC, 10000}: crrSeries(100, 110, 90),
		{cipTC, 10000}: crrSeries(120, 132, 108), // 1.2 times @10: missed
		{podSock, 10}:  crrSeries(100, 110, 90),
		{cipSock, 10}:  crrSeries(100, 110, 90),
	}, stream: map[path]*series{
		podTC: {rate: []float64{1000, 1100, 900}},
		cipTC: {rate: []float64{990, 1089, 891}}, // 0.99: met
	}, streamScale: 10000}
	cp := &cpResults{services: 10, backends: 40, rate: 100, program: time.Second, create: 500 * time.Millisecond}
	for i := range 1000 {
		cp.changes = append(cp.changes, time.Duration(i)*101*time.Microsecond) // p99 100.0ms [99.2, 100.6]
	}
	cp.updates = cp.changes
	var b strings.Builder
	report(&b, o, dp, cp)
	out := b.String()
	for _, want := range []string{
		"ClusterIP@10000 / ClusterIP@10, connect p50 <= 1.05        1.200  [1.200, 1.200]  missed",
		"ClusterIP@10000 / ClusterIP@10, connect p99 <= 1.05        1.200  [1.200, 1.200]  missed",
		"stream ClusterIP / pod IP >= 0.98                          0.990  [0.990, 0.990]  met",
		"EndpointSlice change to map, p99 <= 100ms",
		"undecided: the interval holds 100ms",
		"10  socket LB / pod IP from the same cgroup",
		"not measured here: kube-proxy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestOptions(t *testing.T) {
	ok := options{reps: 1, duration: time.Second, scales: []int{10, 10000}, sockScales: []int{10},
		cpServices: 10000, cpBackends: 4, cpRate: 100}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.sockScales = []int{1000}
	if err := bad.validate(); err == nil {
		t.Error("a socket-LB scale not among the scales passed")
	}
	bad = ok
	bad.scales = []int{1, 10}
	if err := bad.validate(); err == nil {
		t.Error("a scale below the measured frontends passed")
	}
}
