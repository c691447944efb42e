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

// The lab part's targets: another proxy's ClusterIP connect latency over
// cilium-go's, p50.
var (
	iptablesTarget = stats.Target{Value: 3} // at the largest scale, from iptablesScale
	iptablesScale  = 10000
	nftablesTarget = stats.Target{Value: 1} // at every scale
)

func reportLab(w io.Writer, o options, lr *labResults) []string {
	fmt.Fprintf(w, "Side by side with kube-proxy: a lab per proxy, all running at once (cilium-lab: a real API server, 2 nodes,\n")
	fmt.Fprintf(w, "cilium-go as the CNI in native routing; kube-proxy is the lab's bin/kube-proxy beside cilium-go with\n")
	fmt.Fprintf(w, "kube-proxy-replacement=false). Client pod on node 1, in its node's cgroup as pods are; 3 backend pods on node 2.\n")
	fmt.Fprintf(w, "At each scale, %d repetitions of %v interleave the proxies and paths. Connect + first request: medians over\n", o.reps, o.duration)
	fmt.Fprintln(w, "the repetitions of each one's p50 and p99 (µs); ratios are paired by repetition [95% confidence interval];")
	fmt.Fprintln(w, "failed: connections that got no answer in 3 s, of all the repetitions' (left out of the latencies)")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-7s %-26s %-29s %8s %8s %9s %7s   %-24s %s\n", "Svcs", "proxy", "path", "p50 µs", "p99 µs", "conn/s", "failed",
		"p50 / pod IP", "p99 / pod IP")
	for _, n := range lr.scales {
		for _, m := range lr.modes {
			base := lr.crr[labKey{m.key, labPod, n}]
			for _, p := range []path{labPod, labCIP, labCIPTC} {
				s := lr.crr[labKey{m.key, p, n}]
				if s == nil {
					continue
				}
				fmt.Fprintf(w, "  %-7d %-26s %-29s %8.1f %8.1f %9.0f %7d", n, m.name, labPathNames[p],
					stats.Median(s.p50), stats.Median(s.p99), stats.Median(s.rate), s.failed)
				if p != labPod {
					fmt.Fprintf(w, "   %-24s %s", stats.PairedRatio(s.p50, base.p50), stats.PairedRatio(s.p99, base.p99))
				}
				fmt.Fprintln(w)
				if len(s.errors) > 0 {
					fmt.Fprintf(w, "  failures @%d, %s, %s: %s\n", n, m.name, labPathNames[p], strings.Join(s.errors, "; "))
				}
			}
		}
	}
	fmt.Fprintln(w)
	var verdicts []string
	ours := lr.modes[0]
	if ours.kubeProxy != "none" || len(lr.modes) < 2 {
		fmt.Fprintln(w, "(no proxy to compare cilium-go with: -lab-modes)")
	} else {
		fmt.Fprintln(w, "ClusterIP connect + first request, the other proxy's over cilium-go's (higher: cilium-go faster)")
		fmt.Fprintf(w, "  %-7s %-56s %-24s %s\n", "Svcs", "", "p50", "p99")
		largest := lr.scales[len(lr.scales)-1]
		for _, n := range lr.scales {
			cg := lr.crr[labKey{ours.key, labCIP, n}]
			tc := lr.crr[labKey{ours.key, labCIPTC, n}]
			for _, m := range lr.modes[1:] {
				s := lr.crr[labKey{m.key, labCIP, n}]
				r50, r99 := stats.PairedRatio(s.p50, cg.p50), stats.PairedRatio(s.p99, cg.p99)
				fmt.Fprintf(w, "  %-7d %-56s %-24s %s\n", n, m.name+" / cilium-go", r50, r99)
				fmt.Fprintf(w, "  %-7d %-56s %-24s %s\n", n, m.name+" / cilium-go without socket LB (tc)",
					stats.PairedRatio(s.p50, tc.p50), stats.PairedRatio(s.p99, tc.p99))
				var t stats.Target
				switch {
				case m.kubeProxy == "nftables":
					t = nftablesTarget
				case m.kubeProxy == "iptables" && n == largest && n >= iptablesScale:
					t = iptablesTarget
				default:
					continue
				}
				verdicts = append(verdicts, fmt.Sprintf("%-58s %s  %s",
					fmt.Sprintf("lab: %s / cilium-go @%d, ClusterIP p50 %s", m.kubeProxy, n, t), r50, t.Judge(r50)))
			}
		}
		if len(lr.scales) > 1 {
			lo := lr.scales[0]
			a, b := lr.crr[labKey{ours.key, labCIP, largest}], lr.crr[labKey{ours.key, labCIP, lo}]
			fmt.Fprintf(w, "  cilium-go ClusterIP@%d / @%d: p50 %.3f, p99 %.3f (scales run one after the other in a lab, not\n",
				largest, lo, stats.Median(a.p50)/stats.Median(b.p50), stats.Median(a.p99)/stats.Median(b.p99))
			fmt.Fprintln(w, "  interleaved: the crr part above judges this target)")
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Resident memory (VmRSS, MiB, mean per node) of cilium-agent and kube-proxy")
	for _, m := range lr.modes {
		fmt.Fprintf(w, "  %-26s", m.name)
		for _, n := range lr.scales {
			r := lr.rss[labKey{mode: m.key, scale: n}]
			fmt.Fprintf(w, "   @%d: agent %.1f", n, mib(r.agent))
			if m.kubeProxy != "none" {
				fmt.Fprintf(w, " + kube-proxy %.1f", mib(r.kubeProxy))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Programming latency at %d Services, EndpointSlice changes (one endpoint moves) at %d/s for %v\n",
		lr.scales[len(lr.scales)-1], o.cpRate, o.cpDuration)
	for _, m := range lr.modes {
		s := lr.sync[m.key]
		if s == nil {
			continue
		}
		if m.kubeProxy == "none" {
			verdicts = append(verdicts, reportOurSync(w, m, s))
			continue
		}
		fmt.Fprintf(w, "  %-26s %d changes at %.0f/s (update call p50 %.2f ms); its own histograms, per node: the bucket\n",
			m.name, s.changes, s.rate, ms(quantile(s.updates, 0.5)))
		fmt.Fprintln(w, "    holding the quantile, seconds")
		for i := range s.programming {
			p, y := s.programming[i], s.syncs[i]
			fmt.Fprintf(w, "    node %d  trigger time -> rules written: %4.0f observed, p50 %s p99 %s;  rule syncs: %3.0f, p50 %s p99 %s\n",
				i+1, p.count, bucket(p, 0.5), bucket(p, 0.99), y.count, bucket(y, 0.5), bucket(y, 0.99))
		}
	}
	fmt.Fprintln(w)
	return verdicts
}

func bucket(h histogram, q float64) string {
	if h.count == 0 {
		return "-"
	}
	lo, hi := h.quantile(q)
	if math.IsInf(hi, 1) {
		return fmt.Sprintf("> %g", lo)
	}
	return fmt.Sprintf("(%g, %g]", lo, hi)
}

func reportOurSync(w io.Writer, m labMode, s *labSync) string {
	lat := make([]time.Duration, 0, len(s.latencies)+s.lost)
	lat = append(lat, s.latencies...)
	for range s.lost {
		lat = append(lat, changeWait) // a lost change counts as the longest wait
	}
	slices.Sort(lat)
	fmt.Fprintf(w, "  %-26s %d changes at %.0f/s, %d lost (not in every node's maps within %v); update call -> the new\n",
		m.name, s.changes, s.rate, s.lost, changeWait)
	if len(lat) == 0 {
		return "cilium-go EndpointSlice change to every node's map: no changes measured"
	}
	p50, p99 := stats.Quantile(lat, 0.5), stats.Quantile(lat, 0.99)
	lo50, hi50 := stats.QuantileCI(lat, 0.5)
	lo99, hi99 := stats.QuantileCI(lat, 0.99)
	fmt.Fprintf(w, "    backend in the BPF maps of every node: p50 %.2f ms [%.2f, %.2f]   p99 %.2f ms [%.2f, %.2f]   max %.2f ms\n",
		ms(p50), ms(lo50), ms(hi50), ms(p99), ms(lo99), ms(hi99), ms(lat[len(lat)-1]))
	fmt.Fprintf(w, "    (of which the API server's update call: p50 %.2f ms, p99 %.2f ms; from its answer to every node's\n",
		ms(quantile(s.updates, 0.5)), ms(quantile(s.updates, 0.99)))
	fmt.Fprintf(w, "    maps, a lower bound of the agents' share: p50 %.2f ms, p99 %.2f ms)\n",
		ms(quantile(s.afterCall, 0.5)), ms(quantile(s.afterCall, 0.99)))
	return fmt.Sprintf("%-58s %.2f ms [%.2f, %.2f]  %s", fmt.Sprintf("lab: change to every node's map, p99 <= %v", changeTarget),
		ms(p99), ms(lo99), ms(hi99), judgeDuration(lo99, hi99))
}

// quantile is stats.Quantile that takes no samples as zero.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return stats.Quantile(sorted, q)
}
