package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cilium-go/cilium/bench/internal/stats"
	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// The targets (README.md).
var (
	// scaleTarget bounds ClusterIP@largest / ClusterIP@smallest, connect latency.
	scaleTarget = stats.Target{Value: 1.05, AtMost: true}
	// streamTarget bounds stream ClusterIP / pod IP.
	streamTarget = stats.Target{Value: 0.98}
	// changeTarget bounds the p99 of an EndpointSlice change to the map.
	changeTarget = 100 * time.Millisecond
	// disruptionTarget bounds the flows that Maglev moves when one of N
	// backends goes, over the ideal 1/N (those of the backend that went).
	disruptionTarget = stats.Target{Value: 1.2, AtMost: true}
)

func report(w io.Writer, o options, dp *dpResults, cp *cpResults, lr *labResults) {
	fmt.Fprintln(w, "services benchmark")
	var verdicts []string
	if dp != nil {
		verdicts = reportDatapath(w, o, dp)
	}
	if cp != nil {
		verdicts = append(verdicts, reportControlPlane(w, cp))
	}
	if lr != nil {
		verdicts = append(verdicts, reportLab(w, o, lr)...)
	}
	fmt.Fprintln(w, "targets, judged by the 95% confidence interval:")
	for _, v := range verdicts {
		fmt.Fprintln(w, "  "+v)
	}
}

func spread(v []float64) float64 {
	m := stats.Median(v)
	return 50 * (slices.Max(v) - slices.Min(v)) / m
}

func reportDatapath(w io.Writer, o options, dp *dpResults) []string {
	fmt.Fprintf(w, "%d interleaved repetitions of %v; 2 nodes, native routing; the client pod on node 1, the ClusterIP's\n", o.reps, o.duration)
	fmt.Fprintln(w, "3 backend pods on node 2 (the pod-IP baseline dials them in turn). Connect + first request (one-byte")
	fmt.Fprintln(w, "echo): each repetition's p50 and p99 over its connections; shown are their medians over the repetitions,")
	fmt.Fprintln(w, "and each ratio as the geometric mean of the per-repetition ratios [95% confidence interval]")
	fmt.Fprintln(w)
	scales := slices.Sorted(slices.Values(o.scales))
	var verdicts []string
	line := func(label string, s *series, base *series) {
		fmt.Fprintf(w, "  %-38s %8.1f %8.1f %9.0f", label, stats.Median(s.p50), stats.Median(s.p99), stats.Median(s.rate))
		if base != nil {
			fmt.Fprintf(w, "   %s   %s", stats.PairedRatio(s.p50, base.p50), stats.PairedRatio(s.p99, base.p99))
		}
		fmt.Fprintln(w)
	}
	header := func(title, ratioTo string) {
		fmt.Fprintln(w, title)
		fmt.Fprintf(w, "  %-38s %8s %8s %9s   %-28s %s\n", "services, path", "p50 µs", "p99 µs", "conn/s",
			"p50 / "+ratioTo, "p99 / "+ratioTo)
	}
	if o.want("crr") {
		header("ClusterIP translated by the client pod's tc program", "pod IP")
		for _, n := range scales {
			base := dp.crr[crrKey{podTC, n}]
			line(fmt.Sprintf("%d  %s", n, pathNames[podTC]), base, nil)
			line(fmt.Sprintf("%d  %s", n, pathNames[cipTC]), dp.crr[crrKey{cipTC, n}], base)
		}
		if len(scales) > 1 {
			lo, hi := scales[0], scales[len(scales)-1]
			for _, p := range []path{cipTC, podTC} {
				a, b := dp.crr[crrKey{p, hi}], dp.crr[crrKey{p, lo}]
				label := fmt.Sprintf("%s: %d / %d services", pathNames[p], hi, lo)
				fmt.Fprintf(w, "  %-66s %s   %s\n", label, stats.PairedRatio(a.p50, b.p50), stats.PairedRatio(a.p99, b.p99))
			}
			a, b := dp.crr[crrKey{cipTC, hi}], dp.crr[crrKey{cipTC, lo}]
			for _, q := range []struct {
				name     string
				num, den []float64
			}{{"p50", a.p50, b.p50}, {"p99", a.p99, b.p99}} {
				r := stats.PairedRatio(q.num, q.den)
				verdicts = append(verdicts, fmt.Sprintf("%-58s %s  %s",
					fmt.Sprintf("ClusterIP@%d / ClusterIP@%d, connect %s %s", hi, lo, q.name, scaleTarget), r, scaleTarget.Judge(r)))
			}
		}
		fmt.Fprintln(w)
	}
	if o.want("sock") {
		header("ClusterIP translated at connect by the socket programs (a client process in their cgroup)", "pod IP (tc)")
		for _, n := range slices.Sorted(slices.Values(o.sockScales)) {
			base := dp.crr[crrKey{podTC, n}]
			sockBase := dp.crr[crrKey{podSock, n}]
			line(fmt.Sprintf("%d  %s", n, pathNames[podSock]), sockBase, base)
			line(fmt.Sprintf("%d  %s", n, pathNames[cipSock]), dp.crr[crrKey{cipSock, n}], base)
			s := dp.crr[crrKey{cipSock, n}]
			fmt.Fprintf(w, "  %-66s %s   %s\n", fmt.Sprintf("%d  socket LB / pod IP from the same cgroup", n),
				stats.PairedRatio(s.p50, sockBase.p50), stats.PairedRatio(s.p99, sockBase.p99))
		}
		fmt.Fprintln(w)
	}
	if o.want("outside") {
		header("From outside the cluster: the world host, its traffic routed through node 1", "pod IP (routed)")
		for _, n := range scales {
			base := dp.crr[crrKey{podOut, n}]
			line(fmt.Sprintf("%d  %s", n, pathNames[podOut]), base, nil)
			for _, p := range []path{npOut, vipOut, vipMgOut} {
				line(fmt.Sprintf("%d  %s", n, pathNames[p]), dp.crr[crrKey{p, n}], base)
			}
			mg, rnd := dp.crr[crrKey{vipMgOut, n}], dp.crr[crrKey{vipOut, n}]
			fmt.Fprintf(w, "  %-66s %s   %s\n", fmt.Sprintf("%d  LoadBalancer VIP, Maglev / random", n),
				stats.PairedRatio(mg.p50, rnd.p50), stats.PairedRatio(mg.p99, rnd.p99))
		}
		fmt.Fprintln(w)
	}
	if o.want("maglev") {
		ideal := 1 / float64(disruptBackends)
		fmt.Fprintf(w, "Flows moved when one of %d backends of a LoadBalancer VIP goes (%d flows from outside, at %d services;\n",
			disruptBackends, disruptFlows, dp.streamScale)
		fmt.Fprintf(w, "the ideal is those of the backend that went, 1/%d = %.3f): mean over the repetitions, and over the ideal\n",
			disruptBackends, ideal)
		idealSeries := make([]float64, len(dp.moved[spec.LBMaglev]))
		for i := range idealSeries {
			idealSeries[i] = ideal
		}
		for _, alg := range []struct {
			name string
			flag spec.LBFlags
		}{{"Maglev", spec.LBMaglev}, {"random", 0}} {
			m := dp.moved[alg.flag]
			fmt.Fprintf(w, "  %-38s %6.3f   %s\n", alg.name, stats.Mean(m), stats.PairedRatio(m, idealSeries))
		}
		r := stats.PairedRatio(dp.moved[spec.LBMaglev], idealSeries)
		verdicts = append(verdicts, fmt.Sprintf("%-58s %s  %s",
			fmt.Sprintf("Maglev flows moved / ideal 1/N %s", disruptionTarget), r, disruptionTarget.Judge(r)))
		fmt.Fprintln(w)
	}
	if o.want("stream") {
		fmt.Fprintf(w, "TCP stream at %d services (Mbit/s): median, spread (min-max)/median, ratio to pod IP\n", dp.streamScale)
		base := dp.stream[podTC]
		fmt.Fprintf(w, "  %-38s %9.0f  ±%2.0f%%\n", pathNames[podTC], stats.Median(base.rate), spread(base.rate))
		s := dp.stream[cipTC]
		r := stats.PairedRatio(s.rate, base.rate)
		fmt.Fprintf(w, "  %-38s %9.0f  ±%2.0f%%  %s\n", pathNames[cipTC], stats.Median(s.rate), spread(s.rate), r)
		verdicts = append(verdicts, fmt.Sprintf("%-58s %s  %s",
			fmt.Sprintf("stream ClusterIP / pod IP %s", streamTarget), r, streamTarget.Judge(r)))
		fmt.Fprintln(w)
	}
	return verdicts
}

// judgeDuration judges a latency quantile's interval against changeTarget.
func judgeDuration(lo, hi time.Duration) string {
	switch {
	case hi <= changeTarget:
		return "met"
	case lo > changeTarget:
		return "missed"
	}
	return fmt.Sprintf("undecided: the interval holds %v", changeTarget)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func reportControlPlane(w io.Writer, cp *cpResults) string {
	fmt.Fprintf(w, "Control plane: pkg/loadbalancer on a real datapath's maps, fed from a fake clientset through the agent's\n")
	fmt.Fprintf(w, "Service source; %d ClusterIP Services, %d backends (EndpointSlices)\n", cp.services, cp.backends)
	fmt.Fprintf(w, "  every frontend and backend in the BPF maps %v after the first create, %v after the last\n",
		cp.program.Round(time.Millisecond), (cp.program - cp.create).Round(time.Millisecond))
	fmt.Fprintf(w, "  (the creates themselves took %v: the fake clientset computes managed fields)\n", cp.create.Round(time.Millisecond))
	// A lost change counts as the longest wait: the quantiles are then
	// lower bounds.
	lat := slices.Clone(cp.changes)
	for range cp.lost {
		lat = append(lat, changeWait)
	}
	verdict := "no changes measured"
	if len(lat) > 0 {
		p50, p99 := stats.Quantile(lat, 0.5), stats.Quantile(lat, 0.99)
		lo50, hi50 := stats.QuantileCI(lat, 0.5)
		lo99, hi99 := stats.QuantileCI(lat, 0.99)
		fmt.Fprintf(w, "  EndpointSlice update -> new backend in the BPF maps, %d changes at %d/s, %d lost (not there in %v):\n",
			len(lat), cp.rate, cp.lost, changeWait)
		fmt.Fprintf(w, "    p50 %.2f ms [%.2f, %.2f]   p99 %.2f ms [%.2f, %.2f]   max %.2f ms\n",
			ms(p50), ms(lo50), ms(hi50), ms(p99), ms(lo99), ms(hi99), ms(lat[len(lat)-1]))
		fmt.Fprintf(w, "    (timed from before the clientset's update call, whose own p50 is %.2f ms)\n",
			ms(stats.Quantile(cp.updates, 0.5)))
		verdict = fmt.Sprintf("%-58s %.2f ms [%.2f, %.2f]  %s", fmt.Sprintf("EndpointSlice change to map, p99 <= %v", changeTarget),
			ms(p99), ms(lo99), ms(hi99), judgeDuration(lo99, hi99))
	}
	fmt.Fprintf(w, "  Go heap in use after GC: %.1f MiB before the Services, %.1f MiB with them (+%.1f MiB); live heap %.1f -> %.1f MiB\n",
		mib(cp.inuseBase), mib(cp.inuseFull), mib(cp.inuseFull)-mib(cp.inuseBase), mib(cp.liveBase), mib(cp.liveFull))
	fmt.Fprintf(w, "  of which the fake API server's own copy of the objects, measured alone: about %.1f MiB\n", mib(cp.apiShare))
	fmt.Fprintf(w, "  (the agent's share, informers included: about %.1f MiB)\n",
		mib(cp.liveFull)-mib(cp.liveBase)-mib(cp.apiShare))
	fmt.Fprintln(w)
	return verdict
}
