package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/cilium-go/cilium/bench/internal/stats"
)

// allowance is the noise head/base may show and still count as not
// slower: every figure is better lower, and the machines these run on
// (2 shared cores) move a latency's p99 by some percent between runs of
// the same binary.
var allowance = stats.Target{Value: 1.10, AtMost: true}

// judge is a figure's verdict: not slower when the upper end of head/base's
// 95% interval is within the allowance, slower when its lower end is
// beyond it, undecided otherwise, and always with one repetition (no
// interval).
func judge(r stats.Ratio) string {
	switch {
	case math.IsNaN(r.Est):
		return "not measured"
	case allowance.Of(r) == stats.Met:
		return "not slower"
	case allowance.Of(r) == stats.Missed:
		return "slower"
	}
	return "undecided"
}

func (res *results) report(w io.Writer, o options) {
	head := res.head[:12]
	if res.headDirty {
		head += " with uncommitted changes"
	}
	fmt.Fprintf(w, "\nbench/compare: head %s against base %s; repetitions of each part in each tree, interleaved: %d\n",
		head, res.base[:12], o.reps)
	fmt.Fprintf(w, "Each figure: the median over the repetitions in each tree; head/base as the geometric mean of the\n")
	fmt.Fprintf(w, "per-repetition ratios [95%% confidence interval]. Every figure is better lower. A figure is \"not slower\"\n")
	fmt.Fprintf(w, "when its interval's upper end is <= %.2f (a %.0f%% allowance for noise), \"slower\" when its lower end is\n",
		allowance.Value, 100*(allowance.Value-1))
	fmt.Fprintf(w, "above %.2f, \"undecided\" otherwise (always with one repetition: no interval); a part is not slower when\n", allowance.Value)
	fmt.Fprintf(w, "every figure of it is.\n")
	for _, r := range res.parts {
		r.report(w, o.reps)
	}
}

func (r *partResult) report(w io.Writer, reps int) {
	fmt.Fprintf(w, "\n%s: %s %s\n", r.part.name, r.part.program, strings.Join(r.flags, " "))
	fmt.Fprintf(w, "  one run took %s (base) and %s (head), medians\n", medianDuration(r.wall["base"]), medianDuration(r.wall["head"]))
	fmt.Fprintf(w, "  %-52s %-5s %10s %10s   %-26s %s\n", "figure", "unit", "base", "head", "head/base [95% CI]", "verdict")
	var slower, undecided []string
	for _, f := range r.figures {
		base, head := r.series("base", f, reps), r.series("head", f, reps)
		ratio := stats.PairedRatio(head, base)
		v := judge(ratio)
		fmt.Fprintf(w, "  %-52s %-5s %10s %10s   %-26s %s\n", f, r.units[f], value(stats.Median(base)), value(stats.Median(head)),
			ratioString(ratio), v)
		switch v {
		case "slower":
			slower = append(slower, f)
		case "not slower":
		default:
			undecided = append(undecided, f)
		}
	}
	switch {
	case len(slower) > 0:
		fmt.Fprintf(w, "  verdict %s: SLOWER (%s)\n", r.part.name, strings.Join(slower, "; "))
	case len(undecided) > 0:
		fmt.Fprintf(w, "  verdict %s: undecided (%d of %d figures): more -reps would decide\n", r.part.name, len(undecided), len(r.figures))
	default:
		fmt.Fprintf(w, "  verdict %s: not slower\n", r.part.name)
	}
}

// value shows a figure with three or four significant digits, without
// an exponent.
func value(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func ratioString(r stats.Ratio) string {
	switch {
	case math.IsNaN(r.Est):
		return "-"
	case r.N < 2:
		return fmt.Sprintf("%5.3f  [no interval]", r.Est)
	}
	return fmt.Sprintf("%5.3f  [%s, %s]", r.Est, bound(r.Lo), bound(r.Hi))
}

// bound is an end of an interval with three decimals, as the verdict
// reads it against 1.10; a wide one (few repetitions of a noisy figure)
// in three digits.
func bound(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%5.3f", v)
}

// medianDuration is "-" when no run completed.
func medianDuration(v []time.Duration) string {
	if len(v) == 0 {
		return "-"
	}
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(stats.Median(f)).Round(time.Second).String()
}
