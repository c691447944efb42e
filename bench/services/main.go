// Command services benchmarks Services in one run on one machine: (1) the
// latency of connect and first request through a ClusterIP, translated by
// the client pod's own tc program, with 10, 1,000 and 10,000 services in
// the maps, against the backend pod's address directly; (2) the same
// through socket-level balancing, from a client process in a cgroup with
// the socket programs; (3) a TCP stream through the ClusterIP against one
// to the pod; (4) the control plane: pkg/loadbalancer with 10,000
// Services and 40,000 backends from a fake clientset, the latency from an
// EndpointSlice update to the backend in the BPF map, and the Go heap it
// takes; and (5) side by side with kube-proxy in iptables and nftables
// mode, in labs running at once (lab.go). Datapath figures come from
// interleaved repetitions, as bench/datapath's, with each ratio's 95%
// confidence interval and the targets' verdicts (README.md). It needs
// root: `make bench-services`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	duration   time.Duration
	reps       int
	scales     []int // services in the maps, datapath parts
	sockScales []int // the scales the socket-LB client runs at
	parts      string
	cpServices int
	cpBackends int // per service
	cpRate     int // EndpointSlice changes per second
	cpDuration time.Duration
	bin        string // cilium-lab and the lab's binaries
	labModes   string
	labScales  []int
}

func main() {
	// A re-executed copy of this binary is the socket-LB client (sockclient.go).
	if ns := os.Getenv(sockClientEnv); ns != "" {
		os.Exit(sockClientMain(ns, os.Args[1:]))
	}
	var o options
	quick := flag.Bool("quick", false, "a short run: -reps 3 -duration 500ms -scales 10,10000 -cp-services 2000 -cp-duration 3s unless given")
	flag.DurationVar(&o.duration, "duration", 2*time.Second, "length of one measurement")
	flag.IntVar(&o.reps, "reps", 5, "interleaved repetitions of every datapath measurement")
	scales := flag.String("scales", "10,1000,10000", "services in the maps for the ClusterIP measurements (comma separated)")
	sockScales := flag.String("sock-scales", "10,10000", "the scales the socket-LB client is measured at (among -scales)")
	flag.StringVar(&o.parts, "parts", "crr,sock,outside,stream,maglev,cp,lab", "what to run: crr (ClusterIP connect latency), sock (socket LB), outside (NodePort and LoadBalancer VIPs from outside), stream, maglev (Maglev's disruption), cp (control plane), lab (side by side with kube-proxy in labs)")
	flag.IntVar(&o.cpServices, "cp-services", 10000, "Services the control plane holds")
	flag.IntVar(&o.cpBackends, "cp-backends", 4, "backends of each of those Services")
	flag.IntVar(&o.cpRate, "cp-rate", 100, "EndpointSlice changes per second")
	flag.DurationVar(&o.cpDuration, "cp-duration", 10*time.Second, "how long EndpointSlices change")
	flag.StringVar(&o.bin, "bin", "bin", "directory of cilium-lab and the binaries it runs (make build)")
	flag.StringVar(&o.labModes, "lab-modes", "cilium-go,iptables,nftables", "the proxies the lab part compares")
	labScales := flag.String("lab-scales", "10,1000,10000", "Services in each lab, in the lab part (comma separated)")
	flag.Parse()
	if *quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"reps": "3", "duration": "500ms", "scales": "10,10000",
			"cp-services": "2000", "cp-duration": "3s", "lab-scales": "10,2000"} {
			if !set[name] {
				if err := flag.Set(name, v); err != nil {
					panic(err)
				}
			}
		}
	}
	var err error
	if o.scales, err = parseInts(*scales); err == nil {
		o.sockScales, err = parseInts(*sockScales)
	}
	if err == nil {
		o.labScales, err = parseInts(*labScales)
	}
	if err == nil {
		err = o.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/services:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// An interrupt stops between measurements, so that the namespaces,
	// mounts and the cgroup are still removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := run(ctx, log, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/services:", err)
		os.Exit(1)
	}
	log.Info("done", "took", time.Since(start).Round(time.Second))
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func (o options) want(part string) bool { return slices.Contains(strings.Split(o.parts, ","), part) }

func (o options) validate() error {
	for _, n := range o.scales {
		if n < measuredFrontends || n > maxScale {
			return fmt.Errorf("-scales %d: each must be %d..%d", n, measuredFrontends, maxScale)
		}
	}
	for _, n := range o.sockScales {
		if !slices.Contains(o.scales, n) {
			return fmt.Errorf("-sock-scales %d: not among -scales", n)
		}
	}
	for _, n := range o.labScales {
		if n < 5 || n > maxScale {
			return fmt.Errorf("-lab-scales %d: each must be 5..%d", n, maxScale)
		}
	}
	for m := range strings.SplitSeq(o.labModes, ",") {
		if !slices.ContainsFunc(labModes, func(l labMode) bool { return l.key == m }) {
			return fmt.Errorf("-lab-modes %q: want some of cilium-go, iptables, nftables", m)
		}
	}
	switch {
	case o.reps < 1:
		return fmt.Errorf("-reps %d: at least 1", o.reps)
	case o.duration < 50*time.Millisecond:
		return fmt.Errorf("-duration %v: at least 50ms", o.duration)
	case o.cpServices < 1 || o.cpServices > 20000:
		return fmt.Errorf("-cp-services %d: want 1..20000", o.cpServices)
	case o.cpBackends < 1 || o.cpBackends > 6:
		return fmt.Errorf("-cp-backends %d: want 1..6 (the maps hold 65536 entries)", o.cpBackends)
	case o.cpRate < 1 || o.cpRate > 1000:
		return fmt.Errorf("-cp-rate %d: want 1..1000", o.cpRate)
	}
	return nil
}

func run(ctx context.Context, log *slog.Logger, o options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates namespaces, a cgroup and loads BPF programs")
	}
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	onClose := func(f func() error) { closers = append(closers, f) }
	var dp *dpResults
	if o.want("crr") || o.want("sock") || o.want("outside") || o.want("stream") || o.want("maglev") {
		b, err := newBed(log, o, onClose)
		if err != nil {
			return err
		}
		if dp, err = b.measure(ctx, log, o); err != nil {
			return err
		}
	}
	var cp *cpResults
	if o.want("cp") {
		if cp, err = measureControlPlane(ctx, log, o, onClose); err != nil {
			return err
		}
	}
	var lr *labResults
	if o.want("lab") {
		if lr, err = measureLabs(ctx, log, o, onClose); err != nil {
			return err
		}
	}
	report(os.Stdout, o, dp, cp, lr)
	return nil
}
