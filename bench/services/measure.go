package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium-go/cilium/bench/internal/benchlab"
	"github.com/cilium-go/cilium/bench/internal/stats"
	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// A path is how the client reaches the backends.
type path string

const (
	podTC   path = "pod"     // the backends' addresses, from the tc-translated pod (the baseline)
	cipTC   path = "cip"     // the ClusterIP, translated by the client pod's tc program
	podSock path = "sockpod" // the backends' addresses, from a process in the socket-LB cgroup
	cipSock path = "sockcip" // the ClusterIP, translated at connect by the socket programs
	// From outside the cluster (the world host), through node 1:
	podOut   path = "podout"    // the backends' addresses, routed (the baseline)
	npOut    path = "nodeport"  // node 1's NodePort
	vipOut   path = "vip"       // a LoadBalancer address, backends picked at random
	vipMgOut path = "vipmaglev" // a LoadBalancer address, backends picked by its Maglev table
)

var pathNames = map[path]string{
	podTC:    "pod IP (baseline)",
	cipTC:    "ClusterIP, tc",
	podSock:  "pod IP, socket-LB process",
	cipSock:  "ClusterIP, socket LB",
	podOut:   "pod IP, routed (baseline)",
	npOut:    "NodePort",
	vipOut:   "LoadBalancer VIP, random",
	vipMgOut: "LoadBalancer VIP, Maglev",
}

// series is one measurement's value in each repetition.
type series struct {
	p50, p99 []float64 // connect + first request, µs
	rate     []float64 // conn/s, or Mbit/s for the stream
	samples  int
	failed   int      // connections that failed (the lab part counts them)
	errors   []string // the first failures' errors
}

// add appends one repetition's connect/request/close figures.
func (s *series) add(c traffic.CRR) {
	lat := make([]int64, len(c.Latencies))
	for i, l := range c.Latencies {
		lat[i] = int64(l)
	}
	slices.Sort(lat)
	p50, p99 := math.NaN(), math.NaN() // a repetition whose every connection failed measured nothing
	if len(lat) > 0 {
		p50, p99 = float64(stats.Quantile(lat, 0.5))/1e3, float64(stats.Quantile(lat, 0.99))/1e3
	}
	s.p50 = append(s.p50, p50)
	s.p99 = append(s.p99, p99)
	s.rate = append(s.rate, c.Rate())
	s.samples += len(lat)
	s.failed += c.Failed
	for _, e := range c.Errors {
		if len(s.errors) < traffic.MaxErrors {
			s.errors = append(s.errors, e)
		}
	}
}

type crrKey struct {
	path  path
	scale int
}

type dpResults struct {
	crr    map[crrKey]*series
	stream map[path]*series // podTC and cipTC
	// streamScale is the scale the stream and the Maglev disruption
	// ran at.
	streamScale int
	// moved is, by algorithm (spec.LBMaglev or 0: random), the fraction
	// of flows that moved when one of disruptBackends backends went, in
	// each repetition.
	moved map[spec.LBFlags][]float64
}

func (r *dpResults) crrAt(p path, scale int) *series {
	k := crrKey{p, scale}
	if r.crr[k] == nil {
		r.crr[k] = &series{}
	}
	return r.crr[k]
}

// measure runs the datapath parts in interleaved repetitions: each
// repetition visits every scale (ascending, then descending in the next,
// so that neither end always runs first), and at each scale every path
// back to back, in alternating order.
func (b *bed) measure(ctx context.Context, log *slog.Logger, o options) (*dpResults, error) {
	res := &dpResults{crr: map[crrKey]*series{}, stream: map[path]*series{podTC: {}, cipTC: {}},
		streamScale: slices.Max(o.scales), moved: map[spec.LBFlags][]float64{}}
	for r := range o.reps {
		log.Info("repetition", "n", r+1, "of", o.reps)
		scales := slices.Clone(o.scales)
		slices.Sort(scales)
		if r%2 == 1 {
			slices.Reverse(scales)
		}
		for _, n := range scales {
			t0 := time.Now()
			if err := b.scaleTo(n); err != nil {
				return nil, err
			}
			log.Info("services in the maps", "n", n, "written-in", time.Since(t0).Round(time.Millisecond))
			var paths []path
			if o.want("crr") {
				paths = append(paths, podTC, cipTC)
			}
			if o.want("sock") && slices.Contains(o.sockScales, n) {
				paths = append(paths, podSock, cipSock)
			}
			if o.want("outside") {
				paths = append(paths, podOut, npOut, vipOut, vipMgOut)
			}
			if r%2 == 1 {
				slices.Reverse(paths)
			}
			for _, p := range paths {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("interrupted: %w", err)
				}
				c, err := b.crr(ctx, p, o.duration)
				if err != nil {
					return nil, fmt.Errorf("%s at %d services: %w", pathNames[p], n, err)
				}
				res.crrAt(p, n).add(c)
			}
			if o.want("stream") && n == res.streamScale {
				if err := b.streams(ctx, r, o.duration, res); err != nil {
					return nil, err
				}
			}
			if o.want("maglev") && n == res.streamScale {
				if err := b.disruptions(r, res); err != nil {
					return nil, err
				}
			}
		}
	}
	return res, nil
}

// streamSegments: a repetition's stream alternates the two paths in this
// many short streams each, so that the machine's drift within the
// repetition cancels as well as between repetitions.
const streamSegments = 4

// streams measures repetition r's stream on both paths: the mean rate of
// each path's segments.
func (b *bed) streams(ctx context.Context, r int, d time.Duration, res *dpResults) error {
	sum := map[path]float64{}
	for seg := range streamSegments {
		streams := []path{podTC, cipTC}
		if (r+seg)%2 == 1 {
			slices.Reverse(streams)
		}
		for _, p := range streams {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			v, err := b.stream(p, d/streamSegments)
			if err != nil {
				return fmt.Errorf("stream to the %s: %w", pathNames[p], err)
			}
			sum[p] += v
		}
	}
	for p, v := range sum {
		res.stream[p].rate = append(res.stream[p].rate, v/streamSegments)
	}
	return nil
}

// crr measures connect/request/close on p from a child process.
func (b *bed) crr(ctx context.Context, p path, d time.Duration) (traffic.CRR, error) {
	cip := []netip.AddrPort{netip.AddrPortFrom(clusterIP, 80)}
	switch p {
	case podTC:
		return crrInProcess(ctx, "", b.client.NS, b.echoAddrs(), d, false)
	case cipTC:
		return crrInProcess(ctx, "", b.client.NS, cip, d, false)
	case podSock:
		return crrInProcess(ctx, b.cgroup, b.client.NS, b.echoAddrs(), d, false)
	case cipSock:
		r, err := crrInProcess(ctx, b.cgroup, b.client.NS, cip, d, false)
		if err == nil {
			err = sockTranslated(b.c.Nodes[0].DP.Maps())
		}
		return r, err
	case podOut:
		return crrInProcess(ctx, "", b.c.WorldNS, b.echoAddrs(), d, false)
	case npOut:
		return crrInProcess(ctx, "", b.c.WorldNS, []netip.AddrPort{netip.AddrPortFrom(b.c.Nodes[0].IP, nodePort)}, d, false)
	case vipOut:
		return crrInProcess(ctx, "", b.c.WorldNS, []netip.AddrPort{netip.AddrPortFrom(vipRandom, 80)}, d, false)
	case vipMgOut:
		return crrInProcess(ctx, "", b.c.WorldNS, []netip.AddrPort{netip.AddrPortFrom(vipMaglev, 80)}, d, false)
	}
	return traffic.CRR{}, fmt.Errorf("unknown path %q", p)
}

// sockTranslated checks that the socket programs translated the
// connections, not the client pod's tc program behind them (which would
// reach the backends too): each socket they translate leaves an entry in
// the reverse map.
func sockTranslated(maps benchlab.Maps) error {
	ok, err := maps.SockTranslated()
	if err != nil || ok {
		return err
	}
	return errors.New("the socket reverse map is empty: the socket programs translated nothing")
}

// stream writes for d to one backend's sink: directly, or through the
// ClusterIP (which picks one).
func (b *bed) stream(p path, d time.Duration) (float64, error) {
	to := netip.AddrPortFrom(clusterIP, streamPort)
	if p == podTC {
		to = netip.AddrPortFrom(b.backends[0].IP, streamPort)
	}
	return traffic.StreamRate(traffic.DialFrom(b.client.NS, to), b.received, d)
}
