package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium-go/cilium/pkg/api/client"
)

// results is what the run measured.
type results struct {
	// add holds every ADD latency of every round, per plugin; wall the
	// time each round took from start to the last answer.
	add, wall map[string][]time.Duration
	// rss and hwm are the agent's VmRSS and VmHWM in bytes with
	// o.endpoints endpoints.
	rss, hwm int64
}

const (
	// targetRatio is the most cilium's p99 ADD may be of the bridge's.
	targetRatio = 2.0
	// targetRSS is the most the agent may hold with 100 endpoints.
	targetRSS = 100e6
)

// measure runs the warm-up, the rounds and the memory reading. After an
// interrupt it says so instead of listing every ADD it cut short.
func (b *bed) measure(ctx context.Context, log *slog.Logger, o options) (*results, error) {
	res, err := b.measureAll(ctx, log, o)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return res, err
}

func (b *bed) measureAll(ctx context.Context, log *slog.Logger, o options) (*results, error) {
	res := &results{add: map[string][]time.Duration{}, wall: map[string][]time.Duration{}}
	nodes := []*node{b.cilium, b.bridge}
	// One untimed pod per plugin first: the first exec of each binary
	// reads it from disk, which is not what a node busy with pods pays.
	for _, n := range nodes {
		if _, err := n.addAll(ctx, n.pods[:1], 1); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := n.delAll(ctx, n.pods[:1]); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	for r := range o.rounds {
		// Alternate which plugin goes first, so that neither always runs
		// on a machine still busy with the other's DELs.
		order := nodes
		if r%2 == 1 {
			order = []*node{b.bridge, b.cilium}
		}
		for _, n := range order {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			t0 := time.Now()
			lat, err := n.addAll(ctx, n.pods[:o.pods], o.pods)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", r+1, err)
			}
			wall := time.Since(t0)
			res.add[n.name] = append(res.add[n.name], lat...)
			res.wall[n.name] = append(res.wall[n.name], wall)
			log.Info("round", "n", r+1, "of", o.rounds, "plugin", n.name, "p99", percentile(lat, 0.99), "wall", wall)
			if err := n.delAll(ctx, n.pods[:o.pods]); err != nil {
				return nil, fmt.Errorf("round %d: %w", r+1, err)
			}
		}
	}
	if err := b.measureMemory(ctx, log, o, res); err != nil {
		return nil, err
	}
	return res, nil
}

// measureMemory adds o.endpoints pods through cilium-cni, checks that
// the agent holds that many endpoints, and reads its memory.
func (b *bed) measureMemory(ctx context.Context, log *slog.Logger, o options, res *results) error {
	pods := b.cilium.pods[:o.endpoints]
	log.Info("adding pods for the memory reading", "pods", len(pods))
	if _, err := b.cilium.addAll(ctx, pods, o.pods); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	eps, err := client.New(b.agent.Socket).Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("memory: endpoints: %w", err)
	}
	if len(eps) != len(pods) {
		return fmt.Errorf("memory: agent holds %d endpoints, want %d", len(eps), len(pods))
	}
	st, err := procStatus(b.agent.Pid())
	if err != nil {
		return err
	}
	res.rss, res.hwm = st["VmRSS"], st["VmHWM"]
	if res.rss == 0 || res.hwm == 0 {
		return fmt.Errorf("memory: no VmRSS or VmHWM in /proc/%d/status", b.agent.Pid())
	}
	return b.cilium.delAll(ctx, pods)
}

// procStatus reads the sizes ("VmRSS:   1234 kB") of /proc/<pid>/status
// in bytes.
func procStatus(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(val)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		out[key] = n * 1024 // the kernel's "kB" are KiB
	}
	return out, sc.Err()
}

// percentile is the nearest-rank percentile p (0..1] of v.
func percentile(v []time.Duration, p float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func (r *results) report(w io.Writer, o options) {
	fmt.Fprintf(w, "CNI ADD latency: %d rounds of %d concurrent ADDs into one node, interleaved; pooled over rounds (ms)\n\n",
		o.rounds, o.pods)
	fmt.Fprintf(w, "  %-32s %9s %9s %9s %12s\n", "", "p50", "p99", "max", "round wall")
	rows := []struct{ key, label string }{
		{"bridge", "bridge + host-local (baseline)"},
		{"cilium", "cilium-cni + agent (" + o.routingMode + ")"},
	}
	for _, row := range rows {
		v := r.add[row.key]
		fmt.Fprintf(w, "  %-32s %9.1f %9.1f %9.1f %12.1f\n", row.label, ms(percentile(v, 0.5)),
			ms(percentile(v, 0.99)), ms(slices.Max(v)), ms(percentile(r.wall[row.key], 0.5)))
	}
	p50 := float64(percentile(r.add["cilium"], 0.5)) / float64(percentile(r.add["bridge"], 0.5))
	p99 := float64(percentile(r.add["cilium"], 0.99)) / float64(percentile(r.add["bridge"], 0.99))
	fmt.Fprintf(w, "  %-32s %9.2f %9.2f\n\n", "ratio cilium / bridge", p50, p99)
	fmt.Fprintf(w, "  (bridge waits for its host veth to be up, polling after 0, 50, 500 ms...: part of its latency)\n\n")
	fmt.Fprintf(w, "  p99 per round (ms):\n")
	for _, row := range rows {
		fmt.Fprintf(w, "    %-8s", row.key)
		for i := range o.rounds {
			fmt.Fprintf(w, " %7.1f", ms(percentile(r.add[row.key][i*o.pods:(i+1)*o.pods], 0.99)))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nagent memory with %d endpoints: VmRSS %.1f MB, VmHWM (peak of the whole run) %.1f MB (MB = 10^6 bytes)\n\n",
		o.endpoints, float64(r.rss)/1e6, float64(r.hwm)/1e6)
	fmt.Fprintf(w, "target: p99 ADD cilium / bridge <= %.0f: %.2f  %s\n", targetRatio, p99, passFail(p99 <= targetRatio))
	fmt.Fprintf(w, "target: agent VmRSS with %d endpoints < %.0f MB: %.1f MB  %s\n", o.endpoints, targetRSS/1e6,
		float64(r.rss)/1e6, passFail(float64(r.rss) < targetRSS))
}
