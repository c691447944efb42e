package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPairedRatio(t *testing.T) {
	// Per-repetition ratios 0.98 0.99 1.00 0.97 0.99 on a denominator that
	// drifts by half between repetitions: the drift cancels. Expected values
	// from the t-interval on the log ratios, computed independently.
	den := []float64{1000, 1500, 800, 1200, 600}
	num := make([]float64, len(den))
	for i, q := range []float64{0.98, 0.99, 1.00, 0.97, 0.99} {
		num[i] = q * den[i]
	}
	r := pairedRatio(num, den)
	if r.N != 5 || !near(r.Est, 0.985947, 1e-5) || !near(r.Lo, 0.971873, 1e-5) || !near(r.Hi, 1.000225, 1e-5) {
		t.Errorf("got %+v, want 0.98595 [0.97187, 1.00022] of 5", r)
	}
	if got := r.against(0.97); got != met {
		t.Errorf("against 0.97: %v, want met", got)
	}
	if got := r.against(0.98); got != undecided {
		t.Errorf("against 0.98: %v, want undecided", got)
	}
	if got := r.against(1.01); got != missed {
		t.Errorf("against 1.01: %v, want missed", got)
	}
	// Against 0.98 the estimate is 0.006 above: more repetitions resolve it.
	if n := r.repsToDecide(0.98); n <= 5 || n > 100 {
		t.Errorf("repetitions to decide against 0.98: %d", n)
	}

	two := pairedRatio([]float64{95, 100}, []float64{100, 100})
	if !near(two.Est, 0.974679, 1e-5) || !near(two.Lo, 0.703623, 1e-5) || !near(two.Hi, 1.350155, 1e-5) {
		t.Errorf("two repetitions: %+v, want 0.97468 [0.70362, 1.35016]", two)
	}
	if one := pairedRatio([]float64{95}, []float64{100}); !math.IsNaN(one.Lo) || one.against(0.5) != undecided {
		t.Errorf("one repetition has no interval: %+v", one)
	}
	same := pairedRatio([]float64{97, 194}, []float64{100, 200})
	if !near(same.Lo, 0.97, 1e-12) || !near(same.Hi, 0.97, 1e-12) {
		t.Errorf("identical ratios: %+v, want a zero-width interval", same)
	}
}

func TestTQuantile(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.706}, {4, 2.776}, {30, 2.042}, {40, 2.0211}, {60, 2.0003}, {120, 1.9799}, {100000, 1.96}} {
		if got := tQuantile975(c.df); !near(got, c.want, 0.002) {
			t.Errorf("t(0.975, %d) = %.4f, want %.4f", c.df, got, c.want)
		}
	}
}

// TestReportTargets: the report judges (c')/(c) by connect/request/close
// only, and prints intervals and verdicts.
func TestReportTargets(t *testing.T) {
	scenarios := []scenario{{key: "a", name: "(a) node to node"}, {key: "c", name: "(c) pod to pod"}, {key: "c'", name: "(c') policy"}}
	// results[scenario][test][rep]: stream, rr, crr
	results := [][][]float64{
		{{100, 110, 90}, {100, 110, 90}, {100, 110, 90}},
		{{97, 107, 88}, {90, 99, 81}, {90, 99, 81}},
		{{97, 107, 88}, {90, 99, 81}, {80, 88, 72}},
	}
	var b strings.Builder
	report(&b, scenarios, results, time.Second, 3)
	out := b.String()
	for _, want := range []string{
		"(c)/(a) >= 0.95, TCP stream",
		"(c)/(a) >= 0.95, TCP request/response",
		"(c')/(c) >= 0.97, TCP connect/request/close",
		"0.889  [0.889, 0.889]  missed",
		"(c')/(c) is judged by connect/request/close",
		"95% confidence interval",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(c')/(c) >= 0.97, TCP stream") || strings.Contains(out, "(c')/(c) >= 0.97, TCP request") {
		t.Errorf("(c')/(c) judged by stream or request/response:\n%s", out)
	}
}
