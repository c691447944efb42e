package stats

import (
	"math"
	"slices"
	"testing"
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
	r := PairedRatio(num, den)
	if r.N != 5 || !near(r.Est, 0.985947, 1e-5) || !near(r.Lo, 0.971873, 1e-5) || !near(r.Hi, 1.000225, 1e-5) {
		t.Errorf("got %+v, want 0.98595 [0.97187, 1.00022] of 5", r)
	}
	for _, c := range []struct {
		target Target
		want   Verdict
	}{
		{Target{Value: 0.97}, Met},
		{Target{Value: 0.98}, Undecided},
		{Target{Value: 1.01}, Missed},
		// Upper bounds, as for latency ratios.
		{Target{Value: 1.01, AtMost: true}, Met},
		{Target{Value: 0.98, AtMost: true}, Undecided},
		{Target{Value: 0.97, AtMost: true}, Missed},
	} {
		if got := c.target.Of(r); got != c.want {
			t.Errorf("%s: %v, want %v", c.target, got, c.want)
		}
	}
	// Against 0.98 the estimate is 0.006 above: more repetitions resolve it.
	if n := r.RepsToDecide(0.98); n <= 5 || n > 100 {
		t.Errorf("repetitions to decide against 0.98: %d", n)
	}

	two := PairedRatio([]float64{95, 100}, []float64{100, 100})
	if !near(two.Est, 0.974679, 1e-5) || !near(two.Lo, 0.703623, 1e-5) || !near(two.Hi, 1.350155, 1e-5) {
		t.Errorf("two repetitions: %+v, want 0.97468 [0.70362, 1.35016]", two)
	}
	if one := PairedRatio([]float64{95}, []float64{100}); !math.IsNaN(one.Lo) || (Target{Value: 0.5}).Of(one) != Undecided {
		t.Errorf("one repetition has no interval: %+v", one)
	}
	// A repetition that measured nothing (NaN) on either side is no pair.
	gap := PairedRatio([]float64{97, math.NaN(), 99}, []float64{100, 100, math.NaN()})
	if gap.N != 1 || !near(gap.Est, 0.97, 1e-12) {
		t.Errorf("NaN repetitions: %+v, want 0.97 of 1", gap)
	}
	if m := Median([]float64{3, math.NaN(), 1, 2}); m != 2 {
		t.Errorf("median leaving out NaN: %v, want 2", m)
	}
	same := PairedRatio([]float64{97, 194}, []float64{100, 200})
	if !near(same.Lo, 0.97, 1e-12) || !near(same.Hi, 0.97, 1e-12) {
		t.Errorf("identical ratios: %+v, want a zero-width interval", same)
	}
}

func TestTQuantile(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.706}, {4, 2.776}, {30, 2.042}, {40, 2.0211}, {60, 2.0003}, {120, 1.9799}, {100000, 1.96}} {
		if got := TQuantile975(c.df); !near(got, c.want, 0.002) {
			t.Errorf("t(0.975, %d) = %.4f, want %.4f", c.df, got, c.want)
		}
	}
}

func TestQuantile(t *testing.T) {
	v := make([]float64, 1000)
	for i := range v {
		v[i] = float64(i + 1) // 1..1000
	}
	if p50, p99 := Quantile(v, 0.5), Quantile(v, 0.99); p50 != 500 || p99 != 990 {
		t.Errorf("p50 %v, p99 %v: want 500 and 990", p50, p99)
	}
	// n*q = 990, 1.96*sqrt(990*0.01) = 6.17: ranks 983 and 997.
	if lo, hi := QuantileCI(v, 0.99); lo != 983 || hi != 997 {
		t.Errorf("p99 interval [%v, %v], want [983, 997]", lo, hi)
	}
	// Three samples: the interval of the median is the whole sample.
	three := []int64{1, 2, 3}
	if lo, hi := QuantileCI(three, 0.5); lo != 1 || hi != 3 {
		t.Errorf("median of three: [%v, %v], want [1, 3]", lo, hi)
	}
	if Quantile([]float64(nil), 0.5) != 0 || Median([]float64{3, 1, 2, 4}) != 2.5 || !slices.Equal(v[:2], []float64{1, 2}) {
		t.Error("empty quantile, even median or input changed")
	}
}
