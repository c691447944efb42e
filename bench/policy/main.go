// Command policy benchmarks network policy in one run on one machine.
//
// The churn part runs the agent's policy cells (engine, tables, reconciler,
// fed by the Kubernetes tables over a fake clientset) into a node's real BPF maps with
// 1,000 selectors and 100 or 10,000 identities, and adds identities one at
// a time; it prints the process's CPU time per add at each scale and their
// ratio (target: at most 2), from interleaved repetitions with a 95%
// confidence interval, and the time from each add to its entry in the maps.
//
// The lab part (lab.go) measures on a real two-node cluster the delay from
// a policy's API write to its enforcement seen by probes on both nodes,
// and a new pod's (a new identity's) delay until the servers admit it,
// with one and with 1,000 policies and identities present (target: p99 at
// most 50 ms).
//
// The connect, request and close cost of policy with 10,000 map entries
// against no policy is bench/datapath's (c')/(c), which `make
// bench-policy` runs after this. It needs root.
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
	parts := flag.String("parts", "churn,lab", "what to run: churn (identity churn in process), lab (implementation delay on a lab cluster)")
	bin := flag.String("bin", "bin", "directory of cilium-lab and cilium-go's binaries (lab part)")
	flips := flag.Int("flips", 200, "policy creates and deletes measured at each load (lab part)")
	newPods := flag.Int("new-pods", 30, "new pods measured at each load (lab part)")
	fillers := flag.Int("fillers", 1000, "policies and identities present at the large load (lab part)")
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
	want := func(part string) bool { return slices.Contains(strings.Split(*parts, ","), part) }
	if want("lab") {
		phases, err := labPart(ctx, log, *bin, *flips, *newPods, *fillers)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/policy:", err)
			os.Exit(1)
		}
		labReport(os.Stdout, phases)
	}
	if !want("churn") {
		return
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

// labReport prints each load's delays and judges the p99s at the last.
func labReport(w io.Writer, phases []labPhase) {
	fmt.Fprintf(w, "\nImplementation delay on a lab cluster (2 nodes; probes from a client pod on each node to a server pod on each node, %s attempts)\n", probeTimeout)
	fmt.Fprintf(w, "%-9s %-11s %-9s %10s %10s %10s %10s %12s %12s %10s %10s %12s %12s\n", "policies", "identities", "n", "allow p50", "allow p99",
		"deny p50", "deny p99", "new pod p50", "new pod p99", "write p50", "write p99", "answered p50", "answered p99")
	for _, p := range phases {
		fmt.Fprintf(w, "%-9d %-11d %-9s %10s %10s %10s %10s %12s %12s %10s %10s %12s %12s\n", p.policies, p.identities, fmt.Sprintf("%d/%d", len(p.allow), len(p.newPod)),
			quantile(p.allow, 0.5), quantile(p.allow, 0.99), quantile(p.deny, 0.5), quantile(p.deny, 0.99),
			quantile(p.newPod, 0.5), quantile(p.newPod, 0.99), quantile(p.write, 0.5), quantile(p.write, 0.99),
			quantile(p.answered, 0.5), quantile(p.answered, 0.99))
	}
	fmt.Fprintln(w, "(write: the API server's share of allow, the create call's time; answered: the rest of each allow, from")
	fmt.Fprintln(w, " the API server's answer to enforcement, the watch's and the agents' share; n: flips/new pods)")
	if len(phases) == 0 {
		return
	}
	first, last := phases[0], phases[len(phases)-1]
	for _, d := range []struct {
		name        string
		base, under []time.Duration
	}{{"allow", first.allow, last.allow}, {"deny", first.deny, last.deny}, {"new pod", first.newPod, last.newPod}} {
		lo, hi := stats.QuantileCI(d.under, 0.99)
		fmt.Fprintf(w, "%-8s p99 with %d policies: %s [%s, %s], %.2fx the p99 with %d; target <= %s: %s\n",
			d.name, last.policies, quantile(d.under, 0.99), lo.Round(10*time.Microsecond), hi.Round(10*time.Microsecond),
			float64(stats.Quantile(d.under, 0.99))/float64(max(stats.Quantile(d.base, 0.99), 1)), first.policies,
			delayTarget, judgeDelay(lo, hi))
	}
}

// judgeDelay: met when the p99's whole interval is within the target,
// missed when it is wholly beyond, undecided otherwise.
func judgeDelay(lo, hi time.Duration) string {
	switch {
	case hi <= delayTarget:
		return "met"
	case lo > delayTarget:
		return "missed"
	}
	return "undecided: the p99's interval holds the target (more -flips or -new-pods would decide)"
}
