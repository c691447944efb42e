package main

import (
	"math"
	"slices"
)

// ratio is how one scenario compares to another in one test, from the
// interleaved repetitions: rep r of both ran close together in time, so the
// per-repetition ratio num[r]/den[r] cancels the machine's drift that the
// spread of either scenario alone carries. Est is their geometric mean and
// [Lo, Hi] its 95% confidence interval (Student's t on the log ratios).
type ratio struct {
	Est, Lo, Hi float64
	N           int     // repetitions
	logMean     float64 // mean and standard deviation of the log ratios
	logSD       float64
}

func pairedRatio(num, den []float64) ratio {
	n := min(len(num), len(den))
	logs := make([]float64, 0, n)
	for i := range n {
		logs = append(logs, math.Log(num[i]/den[i]))
	}
	r := ratio{N: n, logMean: mean(logs)}
	r.Est = math.Exp(r.logMean)
	r.Lo, r.Hi = math.NaN(), math.NaN()
	if n >= 2 {
		r.logSD = stddev(logs, r.logMean)
		half := tQuantile975(n-1) * r.logSD / math.Sqrt(float64(n))
		r.Lo, r.Hi = math.Exp(r.logMean-half), math.Exp(r.logMean+half)
	}
	return r
}

// verdict against a lower bound: met when the whole interval is at or above
// it, missed when the whole interval is below, undecided otherwise.
type verdict int

const (
	undecided verdict = iota
	met
	missed
)

func (r ratio) against(target float64) verdict {
	switch {
	case r.N < 2:
		return undecided
	case r.Lo >= target:
		return met
	case r.Hi < target:
		return missed
	}
	return undecided
}

// repsToDecide estimates how many repetitions would put the interval on one
// side of target if the log ratios kept their mean and spread; 0 when no
// number up to 1000 would (the estimate sits on the target).
func (r ratio) repsToDecide(target float64) int {
	if r.N < 2 {
		return 0
	}
	dist := math.Abs(r.logMean - math.Log(target))
	for n := max(r.N, 2); n <= 1000; n++ {
		if tQuantile975(n-1)*r.logSD/math.Sqrt(float64(n)) < dist {
			return n
		}
	}
	return 0
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// stddev is the sample standard deviation (n-1).
func stddev(v []float64, m float64) float64 {
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

// tQuantile975 is the two-sided 95% quantile of Student's t with df degrees
// of freedom: the table, then the Cornish-Fisher expansion around the normal.
func tQuantile975(df int) float64 {
	if df <= len(t975) {
		return t975[df-1]
	}
	const z = 1.959964
	d := float64(df)
	return z + (z*z*z+z)/(4*d) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*d*d)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
