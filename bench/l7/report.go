package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cilium-go/cilium/bench/internal/stats"
)

// The targets.
var (
	rateTarget = stats.Target{Value: 0.5} // proxy over L4 only, kept-alive connections
)

const (
	httpP50Target = 150 * time.Microsecond // added by the proxy
	dnsP99Target  = time.Millisecond       // added by the DNS proxy
)

// latency is one run's quantiles.
type latency struct {
	p50, p99 time.Duration
	n        int
}

func latencyOf(lat []time.Duration) latency {
	s := slices.Clone(lat)
	slices.Sort(s)
	return latency{p50: stats.Quantile(s, 0.5), p99: stats.Quantile(s, 0.99), n: len(s)}
}

// httpRun is one run's figures on one path.
type httpRun struct {
	rate float64
	lat  latency
}

// httpPlace is a server's runs by repetition, on each path.
type httpPlace struct {
	where            string
	l4, proxy, relay []httpRun
	cpu              []time.Duration // the proxy process's per request, proxied runs
}

// dnsPlace is a server's DNS runs by repetition: direct, and through the
// proxy with each way of Learn.
type dnsPlace struct {
	where   string
	direct  []latency
	proxied [learnWays][]latency
	cpu     []time.Duration // the proxy process's per lookup, proxied runs
}

// added is what a path adds to a latency, from interleaved repetitions:
// the differences of paired runs, their median and range, and the 95%
// interval of their mean (Student's t).
type added struct {
	median, min, max time.Duration
	mean, lo, hi     time.Duration
	n                int
}

func addedOf(with, without []time.Duration) added {
	var d []float64
	for i := range min(len(with), len(without)) {
		d = append(d, float64(with[i]-without[i]))
	}
	a := added{n: len(d)}
	if a.n == 0 {
		return a
	}
	m := stats.Mean(d)
	a.median, a.mean = time.Duration(stats.Median(d)), time.Duration(m)
	a.min, a.max = time.Duration(slices.Min(d)), time.Duration(slices.Max(d))
	a.lo, a.hi = a.mean, a.mean
	if a.n >= 2 {
		half := stats.TQuantile975(a.n-1) * stats.StdDev(d, m) / math.Sqrt(float64(a.n))
		a.lo, a.hi = time.Duration(m-half), time.Duration(m+half)
	}
	return a
}

func (a added) String() string {
	return fmt.Sprintf("%s (median; range %s to %s; mean %s [%s, %s])", us(a.median), us(a.min), us(a.max), us(a.mean), us(a.lo), us(a.hi))
}

// judge: met when the mean's whole interval is within target, missed
// when it is wholly beyond, undecided otherwise (and with one
// repetition).
func (a added) judge(target time.Duration) string {
	switch {
	case a.n < 2:
		return "undecided: one repetition, no interval"
	case a.hi <= target:
		return "met"
	case a.lo > target:
		return "missed"
	}
	return "undecided: the interval holds the target (more -reps would decide)"
}

func us(d time.Duration) string {
	if d.Abs() < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Round(time.Microsecond).Microseconds())
	}
	return d.Round(10 * time.Microsecond).String()
}

// spread is the median of v and its range, as "m [lo, hi]".
func spread(v []float64, f func(float64) string) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s [%s, %s]", f(stats.Median(v)), f(slices.Min(v)), f(slices.Max(v)))
}

func durs(v []time.Duration) []float64 {
	out := make([]float64, len(v))
	for i, d := range v {
		out[i] = float64(d)
	}
	return out
}

func usf(v float64) string   { return us(time.Duration(v)) }
func ratef(v float64) string { return fmt.Sprintf("%.0f", v) }

// httpReport prints each server's rate and latencies on both paths, the
// rate ratio and the latency the proxy adds, and judges them.
func httpReport(w io.Writer, places []httpPlace, conns int, rateFor, latFor time.Duration) {
	reps := 0
	if len(places) > 0 {
		reps = len(places[0].l4)
	}
	fmt.Fprintf(w, "\nHTTP/1.1 from the client pod on node 1 to a server pod, kept-alive connections: L4 only (the allow's entry) against through\n"+
		"node 1's proxy (the same entry with the proxy's port; %d HTTP rules, the requests matching the third), and through a relay\n"+
		"that copies the bytes of the same redirect and reads none (the floor under any proxy of this shape here). Rate: %d\n"+
		"connections for %s; latency: one connection for %s, a request at a time. %d interleaved repetitions, median [min, max].\n",
		len(httpRules.HTTP), conns, rateFor, latFor, reps)
	fmt.Fprintf(w, "%-11s %-8s %-24s %-24s %-24s\n", "server", "path", "rate (req/s)", "p50", "p99")
	for _, pl := range places {
		for _, r := range []struct {
			name string
			runs []httpRun
		}{{"L4 only", pl.l4}, {"proxy", pl.proxy}, {"relay", pl.relay}} {
			rate, p50, p99 := httpColumns(r.runs)
			fmt.Fprintf(w, "%-11s %-8s %-24s %-24s %-24s\n", pl.where, r.name, spread(rate, ratef), spread(durs(p50), usf), spread(durs(p99), usf))
		}
	}
	for _, pl := range places {
		l4Rate, l4p50, l4p99 := httpColumns(pl.l4)
		pxRate, pxp50, pxp99 := httpColumns(pl.proxy)
		r := stats.PairedRatio(pxRate, l4Rate)
		fmt.Fprintf(w, "%s: rate proxy/L4 %s, target %s: %s\n", pl.where, r, rateTarget, rateTarget.Judge(r))
		a := addedOf(pxp50, l4p50)
		fmt.Fprintf(w, "%s: p50 added %s, target <= %s: %s\n", pl.where, a, us(httpP50Target), a.judge(httpP50Target))
		fmt.Fprintf(w, "%s: p99 added %s (no target)\n", pl.where, addedOf(pxp99, l4p99))
		fmt.Fprintf(w, "%s: the proxy process's CPU per request %s\n", pl.where, spread(durs(pl.cpu), usf))
		if len(pl.relay) > 0 {
			rlRate, rlp50, _ := httpColumns(pl.relay)
			fmt.Fprintf(w, "%s: the relay's floor: rate relay/L4 %s, p50 added %s\n", pl.where, stats.PairedRatio(rlRate, l4Rate), addedOf(rlp50, l4p50))
		}
	}
}

func httpColumns(runs []httpRun) (rate []float64, p50, p99 []time.Duration) {
	for _, r := range runs {
		rate, p50, p99 = append(rate, r.rate), append(p50, r.lat.p50), append(p99, r.lat.p99)
	}
	return rate, p50, p99
}

// dnsReport prints each server's lookup latencies on each path and judges
// the p99 the proxy adds.
func dnsReport(w io.Writer, places []dnsPlace, d time.Duration) {
	reps := 0
	if len(places) > 0 {
		reps = len(places[0].direct)
	}
	fmt.Fprintf(w, "\nDNS over UDP from the client pod on node 1 to an authoritative server pod, a socket per lookup (as a stub resolver), one\n"+
		"lookup at a time for %s, a new name each run: direct (the allow's entry) against through node 1's DNS proxy (the same entry\n"+
		"with the proxy's port; %d DNS rules), with the proxy's Learn a no-op, and telling the agent over its unix socket\n"+
		"(proxy.LearnClient): with a TTL of %ds, which has the proxy tell the agent of the run's first answer only, and with a TTL of 0,\n"+
		"which has it tell the agent of every answer, whose name cache holds the run's name only or %d other learned IPs besides.\n"+
		"%d interleaved repetitions, median [min, max].\n",
		d, len(dnsRules.DNS), benchTTL, fullCacheIPs, reps)
	fmt.Fprintf(w, "%-11s %-46s %-24s %-24s %s\n", "server", "path", "p50", "p99", "lookups")
	for _, pl := range places {
		rows := []struct {
			name string
			runs []latency
		}{{"direct", pl.direct}}
		for l := range learnWays {
			rows = append(rows, struct {
				name string
				runs []latency
			}{"proxy, " + learnWay(l).String(), pl.proxied[l]})
		}
		for _, r := range rows {
			p50, p99, n := dnsColumns(r.runs)
			fmt.Fprintf(w, "%-11s %-46s %-24s %-24s %d\n", pl.where, r.name, spread(durs(p50), usf), spread(durs(p99), usf), n)
		}
	}
	for _, pl := range places {
		_, direct, _ := dnsColumns(pl.direct)
		for l := range learnWays {
			_, p99, _ := dnsColumns(pl.proxied[l])
			a := addedOf(p99, direct)
			fmt.Fprintf(w, "%s: p99 added (%s) %s, target <= %s: %s\n", pl.where, learnWay(l), a, us(dnsP99Target), a.judge(dnsP99Target))
		}
		fmt.Fprintf(w, "%s: the proxy process's CPU per lookup (all Learns) %s\n", pl.where, spread(durs(pl.cpu), usf))
	}
}

func dnsColumns(runs []latency) (p50, p99 []time.Duration, n int) {
	for _, r := range runs {
		p50, p99, n = append(p50, r.p50), append(p99, r.p99), n+r.n
	}
	return p50, p99, n
}

// memoryReport prints each structure's heap with its items, without, and
// per item.
func memoryReport(w io.Writer, figs []memFigure, learn time.Duration) {
	reps := 0
	if len(figs) > 0 {
		reps = len(figs[0].base)
	}
	fmt.Fprintf(w, "\nMemory: live heap after GC that each structure holds (runtime.ReadMemStats), built %d times; the baseline is the same\n"+
		"structure with no selectors (or IPs). %d endpoints; selectors alternately matchName and matchPattern; %d IPs learned per name.\n",
		reps, memEndpoints, ipsPerName)
	fmt.Fprintf(w, "%-52s %-12s %-34s %s\n", "", "baseline", "with (median [min, max])", "added per item")
	for _, f := range figs {
		var added []float64
		for i := range min(len(f.base), len(f.all)) {
			added = append(added, float64(f.all[i]-f.base[i]))
		}
		fmt.Fprintf(w, "%-52s %-12s %-34s %s\n", f.what, mib(stats.Median(int64s(f.base))),
			spread(int64s(f.all), mib), fmt.Sprintf("%.0f bytes per %s [%.0f, %.0f]", stats.Median(added)/float64(f.items), f.per,
				slices.Min(added)/float64(f.items), slices.Max(added)/float64(f.items)))
	}
	if learn > 0 {
		fmt.Fprintf(w, "the agent's cache Learn of a known answer, the cache holding all of them: %s each\n", us(learn))
	}
}

func int64s(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func mib(v float64) string {
	if math.Abs(v) < 1<<20 {
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.2f MiB", v/(1<<20))
}

// checksReport says what the run checked of its paths.
func checksReport(w io.Writer, lines []string) {
	if len(lines) > 0 {
		fmt.Fprintf(w, "\nChecked: %s\n", strings.Join(lines, "; "))
	}
}
