package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/bench/internal/stats"
)

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, head []float64
		want       string
	}{
		{"the same", []float64{10, 12, 11}, []float64{10, 12, 11.1}, "not slower"},
		{"faster", []float64{10, 12, 11}, []float64{8, 9.5, 9}, "not slower"},
		{"a fifth slower", []float64{10, 12, 11}, []float64{12, 14.5, 13.1}, "slower"},
		{"noisy", []float64{10, 12, 11}, []float64{7, 16, 11}, "undecided"},
		{"one repetition", []float64{10}, []float64{10}, "undecided"},
		{"not measured", []float64{math.NaN(), math.NaN()}, []float64{1, 2}, "not measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(stats.PairedRatio(tc.head, tc.base)); got != tc.want {
				t.Fatalf("judge: %q, want %q", got, tc.want)
			}
		})
	}
}

// A part's verdict names the figures that decide it.
func TestPartVerdict(t *testing.T) {
	r := newPartResult(findPart("cni"), nil)
	for rep, v := range []struct{ p50, p99 float64 }{{10, 20}, {11, 22}, {10.5, 21}} {
		r.add("base", rep, time.Minute, []sample{{"ADD p50", "ms", v.p50}, {"ADD p99", "ms", v.p99}})
		r.add("head", rep, time.Minute, []sample{{"ADD p50", "ms", v.p50}, {"ADD p99", "ms", 1.3 * v.p99}})
	}
	var sb strings.Builder
	r.report(&sb, 3)
	if !strings.Contains(sb.String(), "verdict cni: SLOWER (ADD p99)\n") {
		t.Fatalf("report:\n%s", sb.String())
	}
}

// A figure a run did not print is NaN in that repetition, and the others
// stay paired.
func TestAddMissingFigure(t *testing.T) {
	r := newPartResult(findPart("policy"), nil)
	r.add("base", 0, time.Minute, []sample{{"a", "ms", 1}})
	r.add("base", 1, time.Minute, []sample{{"a", "ms", 2}, {"b", "ms", 3}, {"b", "ms", 4}})
	r.add("base", 2, time.Minute, []sample{{"b", "ms", 5}})
	for _, tc := range []struct {
		figure string
		want   []float64
	}{{"a", []float64{1, 2, math.NaN()}}, {"b", []float64{math.NaN(), 3, 5}}} {
		got := r.series("base", tc.figure, 3)
		for i := range tc.want {
			if !same(got[i], tc.want[i]) {
				t.Fatalf("series %s: %v, want %v", tc.figure, got, tc.want)
			}
		}
	}
}
