package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/bench/internal/benchlab"
	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// The lab's paths. Every client is a child process in the client pod's
// network namespace and, as the lab's pods are, in node 1's cgroup: with
// cilium-go that cgroup has the socket programs, so a ClusterIP is
// translated at connect.
const (
	labPod   path = "labpod"   // the backend pods' addresses in turn
	labCIP   path = "labcip"   // the ClusterIP
	labCIPTC path = "labciptc" // cilium-go only: the ClusterIP from outside the node's cgroup (the pod's tc program)
)

var labPathNames = map[path]string{
	labPod:   "pod IP",
	labCIP:   "ClusterIP",
	labCIPTC: "ClusterIP, tc (no socket LB)",
}

type labKey struct {
	mode  string
	path  path
	scale int
}

// rss is the resident memory of a node's proxy processes, mean over the
// nodes.
type rss struct{ agent, kubeProxy uint64 }

type labResults struct {
	modes  []labMode
	scales []int
	crr    map[labKey]*series
	rss    map[labKey]rss // path unused
	sync   map[string]*labSync
}

// labSync is the programming latency at the largest scale: cilium-go's
// timed by the bench (update call to the new backend in both nodes' BPF
// maps), kube-proxy's from its own network-programming histogram (from
// the EndpointSlice's last-change-trigger-time, which the bench sets, to
// its rules written), with its rule syncs' durations.
type labSync struct {
	changes int
	rate    float64         // changes per second achieved
	updates []time.Duration // the update calls' own durations, sorted
	// cilium-go
	latencies []time.Duration // sorted
	// afterCall is each latency less its update call: from the API
	// server's answer to every node's maps, sorted. The change is
	// committed before the answer, so this bounds the agents' share from
	// below, as latencies does from above.
	afterCall []time.Duration
	lost      int
	// kube-proxy, per node
	programming []histogram
	syncs       []histogram
}

func (o options) selectedLabModes() []labMode {
	var out []labMode
	for _, m := range labModes {
		if slices.Contains(strings.Split(o.labModes, ","), m.key) {
			out = append(out, m)
		}
	}
	return out
}

// measureLabs starts a lab per proxy, grows them together through the
// scales, and at each scale runs interleaved repetitions over the labs
// and paths; at the largest it times EndpointSlice changes in each lab
// in turn.
func measureLabs(ctx context.Context, log *slog.Logger, o options, onClose func(func() error)) (*labResults, error) {
	res := &labResults{modes: o.selectedLabModes(), scales: slices.Sorted(slices.Values(o.labScales)),
		crr: map[labKey]*series{}, rss: map[labKey]rss{}, sync: map[string]*labSync{}}
	var labs []*labBed
	for _, m := range res.modes {
		l, err := startLab(ctx, log, o.bin, m, onClose)
		if err != nil {
			return nil, err
		}
		labs = append(labs, l)
	}
	for _, n := range res.scales {
		// The labs grow at once: each API server takes a share of the
		// machine, and one alone leaves some idle.
		errs := make([]error, len(labs))
		var wg sync.WaitGroup
		for i, l := range labs {
			wg.Go(func() { errs[i] = l.scaleTo(ctx, log, n) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		for _, l := range labs {
			m, err := l.memory()
			if err != nil {
				return nil, err
			}
			res.rss[labKey{mode: l.mode.key, scale: n}] = m
		}
		if err := res.repeat(ctx, log, o, labs, n); err != nil {
			return nil, err
		}
	}
	// Each lab's programming latency is measured with the others frozen:
	// a kube-proxy's rule sync at 10,000 Services takes seconds of both
	// cores, and labs sharing a machine must not time each other. No
	// datapath is measured after a lab has been frozen.
	for _, l := range labs {
		log.Info("EndpointSlice changes", "proxy", l.mode.name, "rate", o.cpRate, "for", o.cpDuration)
		s, err := measureAlone(ctx, o, labs, l)
		if err != nil {
			return nil, err
		}
		res.sync[l.mode.key] = s
	}
	return res, nil
}

// repeat runs the repetitions at scale n: every lab in each, forward and
// backward in turn, and in each lab every path, in alternating order.
func (res *labResults) repeat(ctx context.Context, log *slog.Logger, o options, labs []*labBed, n int) error {
	for r := range o.reps {
		log.Info("lab repetition", "services", n, "n", r+1, "of", o.reps)
		order := slices.Clone(labs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, l := range order {
			paths := []path{labPod, labCIP}
			if l.mode.kubeProxy == "none" {
				paths = append(paths, labCIPTC)
			}
			if r%2 == 1 {
				slices.Reverse(paths)
			}
			for _, p := range paths {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("interrupted: %w", err)
				}
				c, err := l.crr(ctx, p, o.duration)
				if err != nil {
					return fmt.Errorf("%s, %s at %d Services: %w", l.mode.name, labPathNames[p], n, err)
				}
				k := labKey{l.mode.key, p, n}
				if res.crr[k] == nil {
					res.crr[k] = &series{}
				}
				res.crr[k].add(c)
			}
		}
	}
	return nil
}

// measureAlone measures one lab's programming latency with the other
// labs frozen.
func measureAlone(ctx context.Context, o options, labs []*labBed, measured *labBed) (s *labSync, err error) {
	for _, l := range labs {
		if l == measured {
			continue
		}
		if err := l.Freeze(true); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, l.Freeze(false)) }()
	}
	return measured.measureSync(ctx, o)
}

// crr measures connect/request/close on p from a child process.
func (l *labBed) crr(ctx context.Context, p path, d time.Duration) (traffic.CRR, error) {
	cgroup := l.Plan.Nodes[0].Cgroup
	switch p {
	case labPod:
		var to []netip.AddrPort
		for _, b := range l.backends {
			to = append(to, netip.AddrPortFrom(b, echoPort))
		}
		return crrInProcess(ctx, cgroup, l.directNS, to, d, true)
	case labCIP:
		r, err := crrInProcess(ctx, cgroup, l.clientNS, []netip.AddrPort{netip.AddrPortFrom(l.cip, 80)}, d, true)
		if err == nil && l.mode.kubeProxy == "none" {
			err = l.sockTranslated()
		}
		return r, err
	case labCIPTC:
		return crrInProcess(ctx, "", l.clientNS, []netip.AddrPort{netip.AddrPortFrom(l.cip, 80)}, d, true)
	}
	return traffic.CRR{}, fmt.Errorf("unknown path %q", p)
}

// memory reads the proxies' resident memory (VmRSS), the mean per node.
func (l *labBed) memory() (rss, error) {
	var sum rss
	for _, n := range l.Plan.Nodes {
		procs, err := benchlab.NodeProcs(n)
		if err != nil {
			return rss{}, err
		}
		for name, into := range map[string]*uint64{"cilium-agent": &sum.agent, "kube-proxy": &sum.kubeProxy} {
			for _, pid := range procs[name] {
				v, err := vmRSS(pid)
				if err != nil {
					return rss{}, err
				}
				*into += v
			}
		}
	}
	k := uint64(len(l.Plan.Nodes))
	return rss{sum.agent / k, sum.kubeProxy / k}, nil
}

func vmRSS(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// measureSync changes EndpointSlices of fillers at o.cpRate for
// o.cpDuration: each change moves one endpoint to an address of its own
// and stamps the slice's last-change-trigger-time, as the EndpointSlice
// controller does.
func (l *labBed) measureSync(ctx context.Context, o options) (*labSync, error) {
	var fillers []*filler
	for _, f := range l.fillers {
		if !f.live {
			fillers = append(fillers, f)
		}
	}
	total := min(int(o.cpDuration.Seconds()*float64(o.cpRate)), len(fillers), 1<<16)
	res := &labSync{changes: total}
	var before []metrics
	pinned := l.maps
	if pinned == nil {
		var err error
		if before, err = l.kubeProxyMetrics(); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	tick := time.NewTicker(time.Second / time.Duration(o.cpRate))
	defer tick.Stop()
	t0 := time.Now()
	for k := range total {
		if k > 0 {
			<-tick.C
		}
		f := fillers[k]
		addr := netip.AddrFrom4([4]byte{10, 123, byte(k >> 8), byte(k)})
		es := f.slice.DeepCopy()
		es.Endpoints[0].Addresses = []string{addr.String()}
		start := time.Now()
		if es.Annotations == nil {
			es.Annotations = map[string]string{}
		}
		es.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] = start.UTC().Format(time.RFC3339Nano)
		wg.Go(func() {
			_, err := l.Clientset.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, es, metav1.UpdateOptions{})
			update := time.Since(start)
			var lat time.Duration
			if err == nil && pinned != nil {
				lat, err = programmed(ctx, pinned, spec.Frontend{Address: f.cip, Port: fillerPort, Protocol: spec.ProtoTCP}, addr, start)
			}
			mu.Lock()
			defer mu.Unlock()
			res.updates = append(res.updates, update)
			switch {
			case errors.Is(err, errNotProgrammed):
				res.lost++
			case err != nil && firstErr == nil:
				firstErr = fmt.Errorf("%s: change %d (%s): %w", l.mode.name, k, f.name, err)
			case err == nil && pinned != nil:
				res.latencies = append(res.latencies, lat)
				res.afterCall = append(res.afterCall, max(lat-update, 0))
			}
		})
	}
	res.rate = float64(total) / time.Since(t0).Seconds()
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	slices.Sort(res.latencies)
	slices.Sort(res.afterCall)
	slices.Sort(res.updates)
	if before == nil {
		return res, nil
	}
	// kube-proxy observes a change once it has written the rules; wait
	// until each node's histogram counts every change, or a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		after, err := l.kubeProxyMetrics()
		if err != nil {
			return nil, err
		}
		res.programming, res.syncs = nil, nil
		done := true
		for i := range after {
			p := after[i].histogram("kubeproxy_network_programming_duration_seconds").minus(before[i].histogram("kubeproxy_network_programming_duration_seconds"))
			res.programming = append(res.programming, p)
			res.syncs = append(res.syncs, after[i].histogram("kubeproxy_sync_proxy_rules_duration_seconds").
				minus(before[i].histogram("kubeproxy_sync_proxy_rules_duration_seconds")))
			done = done && p.count >= float64(total)
		}
		if done || time.Now().After(deadline) {
			return res, nil
		}
		time.Sleep(time.Second)
	}
}

var errNotProgrammed = errors.New("not in the maps in time")

// programmed polls every node's maps until f's backends include addr, and
// returns the time from start to the last node having it.
func programmed(ctx context.Context, maps []benchlab.Maps, f spec.Frontend, addr netip.Addr, start time.Time) (time.Duration, error) {
	var last time.Duration
	for _, m := range maps {
		for {
			bs, err := m.ServiceBackends(f)
			// A read racing the agent's write of the same service may
			// find a slot gone: read again.
			if err == nil && slices.ContainsFunc(bs, func(b spec.Backend) bool { return b.Address == addr }) {
				last = max(last, time.Since(start))
				break
			}
			if time.Since(start) > changeWait {
				return 0, errNotProgrammed
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			time.Sleep(time.Millisecond)
		}
	}
	return last, nil
}

// sockTranslated checks that node 1's socket programs translated the
// client's ClusterIP connects, as they do a pod's.
func (l *labBed) sockTranslated() error { return sockTranslated(l.maps[0]) }

// metrics are a Prometheus text exposition's samples by name and labels.
type metrics map[string]float64

// kubeProxyMetrics scrapes every node's kube-proxy, from inside the node.
func (l *labBed) kubeProxyMetrics() ([]metrics, error) {
	var out []metrics
	for _, n := range l.Plan.Nodes {
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := netnamespace.Do(n.Netns, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + net.JoinHostPort(n.IP.String(), "10249") + "/metrics")
		if err != nil {
			return nil, fmt.Errorf("%s: kube-proxy metrics on %s: %w", l.mode.name, n.Name, err)
		}
		m := metrics{}
		s := bufio.NewScanner(resp.Body)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			line := s.Text()
			i := strings.LastIndexByte(line, ' ')
			if strings.HasPrefix(line, "#") || i < 0 {
				continue
			}
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				m[line[:i]] = v
			}
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if err := s.Err(); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// histogram is a Prometheus histogram without labels: cumulative counts
// by upper bound.
type histogram struct {
	bounds, counts []float64
	count          float64
}

// histogram reads the histogram name, summed over its labels other than
// le. kube-proxy labels its histograms with ip_family and syncs IPv6
// rules too: the lab is IPv4, so IPv6 samples are left out.
func (m metrics) histogram(name string) histogram {
	byBound := map[float64]float64{}
	var h histogram
	for k, v := range m {
		if strings.Contains(k, `ip_family="IPv6"`) {
			continue
		}
		if rest, ok := strings.CutPrefix(k, name+"_bucket{"); ok {
			_, le, ok := strings.Cut(rest, `le="`)
			le, _, _ = strings.Cut(le, `"`)
			if b, err := strconv.ParseFloat(le, 64); ok && err == nil && !math.IsInf(b, 1) {
				byBound[b] += v
			}
		}
		if k == name+"_count" || strings.HasPrefix(k, name+"_count{") {
			h.count += v
		}
	}
	h.bounds = slices.Sorted(maps.Keys(byBound))
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{bounds: h.bounds, count: h.count - o.count}
	for i, c := range h.counts {
		if i < len(o.counts) {
			c -= o.counts[i]
		}
		out.counts = append(out.counts, c)
	}
	return out
}

// quantile is the bucket holding quantile q: (lo, hi] seconds; hi is
// +Inf past the last bound.
func (h histogram) quantile(q float64) (lo, hi float64) {
	rank := q * h.count
	lo = 0
	for i, c := range h.counts {
		if c >= rank {
			return lo, h.bounds[i]
		}
		lo = h.bounds[i]
	}
	return lo, math.Inf(1)
}
