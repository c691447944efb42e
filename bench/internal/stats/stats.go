// Package stats holds the statistics the benchmarks under bench/ report
// with: ratios of paired, interleaved repetitions with their 95%
// confidence intervals, the verdict of such a ratio against a target, and
// medians and quantiles (with a distribution-free interval) of samples.
package stats

import (
	"fmt"
	"math"
	"slices"
)

// Ratio is how one scenario compares to another, from interleaved
// repetitions: repetition r of both ran close together in time, so the
// per-repetition ratio num[r]/den[r] cancels the machine's drift that the
// spread of either scenario alone carries. Est is their geometric mean
// and [Lo, Hi] its 95% confidence interval (Student's t on the log
// ratios).
type Ratio struct {
	Est, Lo, Hi float64
	N           int     // repetitions
	logMean     float64 // mean and standard deviation of the log ratios
	logSD       float64
}

// PairedRatio is the ratio of num to den, repetition by repetition. A
// repetition that measured nothing on either side (NaN) is left out.
func PairedRatio(num, den []float64) Ratio {
	var logs []float64
	for i := range min(len(num), len(den)) {
		if !math.IsNaN(num[i]) && !math.IsNaN(den[i]) {
			logs = append(logs, math.Log(num[i]/den[i]))
		}
	}
	n := len(logs)
	r := Ratio{N: n, logMean: Mean(logs)}
	r.Est = math.Exp(r.logMean)
	r.Lo, r.Hi = math.NaN(), math.NaN()
	if n >= 2 {
		r.logSD = StdDev(logs, r.logMean)
		half := TQuantile975(n-1) * r.logSD / math.Sqrt(float64(n))
		r.Lo, r.Hi = math.Exp(r.logMean-half), math.Exp(r.logMean+half)
	}
	return r
}

// String is the estimate and its interval.
func (r Ratio) String() string {
	if math.IsNaN(r.Lo) {
		return fmt.Sprintf("%5.3f  [one repetition: no interval]", r.Est)
	}
	return fmt.Sprintf("%5.3f  [%5.3f, %5.3f]", r.Est, r.Lo, r.Hi)
}

// Verdict is a ratio's standing against a target.
type Verdict int

const (
	Undecided Verdict = iota
	Met
	Missed
)

// Target is a bound a ratio must keep: at least Value (a throughput
// ratio, higher is better) or, with AtMost, at most Value (a latency
// ratio, lower is better).
type Target struct {
	Value  float64
	AtMost bool
}

// String is ">= 0.95" or "<= 1.05".
func (t Target) String() string {
	if t.AtMost {
		return fmt.Sprintf("<= %.2f", t.Value)
	}
	return fmt.Sprintf(">= %.2f", t.Value)
}

// Of judges r: met when its whole interval keeps the bound, missed when
// its whole interval breaks it, undecided otherwise (and with one
// repetition, which has no interval).
func (t Target) Of(r Ratio) Verdict {
	if r.N < 2 {
		return Undecided
	}
	switch {
	case t.AtMost && r.Hi <= t.Value, !t.AtMost && r.Lo >= t.Value:
		return Met
	case t.AtMost && r.Lo > t.Value, !t.AtMost && r.Hi < t.Value:
		return Missed
	}
	return Undecided
}

// Judge says Of in words, and when undecided how many repetitions would
// likely decide.
func (t Target) Judge(r Ratio) string {
	switch t.Of(r) {
	case Met:
		return "met"
	case Missed:
		return "missed"
	}
	if n := r.RepsToDecide(t.Value); n > 0 {
		return fmt.Sprintf("undecided: the interval holds %.2f; about %d repetitions would decide (-reps %d)", t.Value, n, n)
	}
	return fmt.Sprintf("undecided: the interval holds %.2f", t.Value)
}

// RepsToDecide estimates how many repetitions would put the interval on
// one side of target if the log ratios kept their mean and spread; 0 when
// no number up to 1000 would (the estimate sits on the target).
func (r Ratio) RepsToDecide(target float64) int {
	if r.N < 2 {
		return 0
	}
	dist := math.Abs(r.logMean - math.Log(target))
	for n := max(r.N, 2); n <= 1000; n++ {
		if TQuantile975(n-1)*r.logSD/math.Sqrt(float64(n)) < dist {
			return n
		}
	}
	return 0
}

// Mean is the arithmetic mean.
func Mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// StdDev is the sample standard deviation (n-1) around m.
func StdDev(v []float64, m float64) float64 {
	s := 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(v)-1))
}

// t975 holds the 0.975 quantiles of Student's t for 1 to 30 degrees of freedom.
var t975 = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// TQuantile975 is the two-sided 95% quantile of Student's t with df
// degrees of freedom: the table, then the Cornish-Fisher expansion around
// the normal.
func TQuantile975(df int) float64 {
	if df <= len(t975) {
		return t975[df-1]
	}
	const z = 1.959964
	d := float64(df)
	return z + (z*z*z+z)/(4*d) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*d*d)
}

// Median is the middle of v (the mean of the two middle values when
// their number is even), leaving out NaN (nothing measured); NaN when
// nothing is left.
func Median(v []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Quantile is the q-quantile of sorted (nearest rank).
func Quantile[T ~int64 | ~float64](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// QuantileCI is a distribution-free 95% confidence interval of the
// q-quantile of the population that sorted samples: the order statistics
// whose ranks bound n*q by 1.96 binomial standard deviations. With too
// few samples an end is the sample's extreme.
func QuantileCI[T ~int64 | ~float64](sorted []T, q float64) (lo, hi T) {
	n := float64(len(sorted))
	if n == 0 {
		return 0, 0
	}
	half := 1.959964 * math.Sqrt(n*q*(1-q))
	l := int(math.Floor(n*q-half)) - 1
	h := int(math.Ceil(n*q+half)) - 1
	last := len(sorted) - 1
	return sorted[min(max(l, 0), last)], sorted[min(max(h, 0), last)]
}
