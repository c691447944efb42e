// Command policy benchmarks network policy in one run on one machine.
// Today it measures identity churn: the agent's policy cells (engine,
// tables, reconciler, fed by informers on a fake clientset) write into a
// node's real BPF maps with 1,000 selectors and 100 or 10,000
// identities, and identities are added one at a time; it prints the
// process's CPU time per add at each scale and their ratio (target: at
// most 2), from interleaved repetitions with a 95% confidence interval,
// and the time from each add to its entry in the maps. The connect,
// request and close cost of policy with 10,000 map entries against no
// policy is bench/datapath's (c')/(c). It needs root: `make
// bench-policy`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/bench/internal/stats"
)

// churnTarget: CPU per identity add at the large scale over the small.
var churnTarget = stats.Target{Value: 2, AtMost: true}

func main() {
	reps := flag.Int("reps", 3, "interleaved repetitions of each scale")
	adds := flag.Int("adds", 200, "identities added per repetition")
	small := flag.Int("small", 100, "identities present at the small scale")
	large := flag.Int("large", 10000, "identities present at the large scale")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench/policy needs root: it loads BPF programs and makes network namespaces")
		os.Exit(1)
	}
	var smallRuns, largeRuns []churnResult
	for rep := range *reps {
		for _, scale := range []int{*small, *large} {
			log.Info("churn", "rep", rep+1, "identities", scale)
			r, err := churn(ctx, log, scale, *adds)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench/policy:", err)
				os.Exit(1)
			}
			if scale == *small {
				smallRuns = append(smallRuns, r)
			} else {
				largeRuns = append(largeRuns, r)
			}
		}
	}
	report(os.Stdout, smallRuns, largeRuns)
}

// report prints each scale's figures and the ratio of CPU per add.
func report(w io.Writer, small, large []churnResult) {
	fmt.Fprintf(w, "\nIdentity churn: %d selectors, %d local endpoints, an identity added at a time (each matching one selector)\n",
		churnSelectors, churnEndpoints)
	fmt.Fprintf(w, "%-12s %14s %12s %12s %6s\n", "identities", "CPU per add", "add p50", "add p99", "lost")
	var cpuSmall, cpuLarge []float64
	for _, runs := range [][]churnResult{small, large} {
		var lat []time.Duration
		var cpu []float64
		lost := 0
		for _, r := range runs {
			lat = append(lat, r.latencies...)
			cpu = append(cpu, float64(r.cpuPerAdd))
			lost += r.lost
		}
		slices.Sort(lat)
		if len(runs) > 0 {
			fmt.Fprintf(w, "%-12d %14s %12s %12s %6d\n", runs[0].identities, time.Duration(stats.Median(cpu)).Round(time.Microsecond),
				quantile(lat, 0.5), quantile(lat, 0.99), lost)
		}
		if len(runs) > 0 && runs[0].identities == small[0].identities {
			cpuSmall = cpu
		} else {
			cpuLarge = cpu
		}
	}
	fmt.Fprintf(w, "CPU per add by repetition: %s\n", perRep(small, large))
	r := stats.PairedRatio(cpuLarge, cpuSmall)
	fmt.Fprintf(w, "CPU per add, %d / %d identities: %s  target %s: %s\n",
		large[0].identities, small[0].identities, r, churnTarget, churnTarget.Judge(r))
}

func quantile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	return stats.Quantile(sorted, q).Round(10 * time.Microsecond).String()
}

// perRep lists each repetition's CPU per add at both scales.
func perRep(small, large []churnResult) string {
	var parts []string
	for i := range min(len(small), len(large)) {
		parts = append(parts, fmt.Sprintf("%s/%s", small[i].cpuPerAdd.Round(time.Microsecond), large[i].cpuPerAdd.Round(time.Microsecond)))
	}
	return strings.Join(parts, " ")
}
