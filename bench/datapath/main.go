// Command datapath benchmarks the eBPF datapath against the kernel without
// it, in one run on one machine: (a) node to node, (b) pod to pod by plain
// kernel routing, (c) pod to pod through the datapath in native mode, (c')
// the same with 10,000 policy entries and identities, (d) in tunnel mode,
// (e) native with the stack routing what leaves the node, (f) the floor of
// any datapath on veth pods (bare redirects, no lookups: floor.go), and
// (c-nk) and (c'-nk) as (c) and (c') with netkit pod devices, when the
// kernel has them. Each is measured for a TCP stream, request/response on
// one connection and connect/request/close, in interleaved repetitions; it
// prints medians, their spread, each ratio to (a) with its 95% confidence
// interval from the paired repetitions, and whether each target is met,
// missed or undecided (README.md). It needs root: `make bench`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/podlink"
	"github.com/cilium-go/cilium/pkg/identity"
)

const (
	streamPort = 5001
	echoPort   = 5002
	// policyScale is the size of the policy and identity set in (c').
	policyScale = 10000
)

// scenario is a pair of namespaces to measure between.
type scenario struct {
	key      string // how the report refers to it: "a", "c", "c'", ...
	name     string
	srcNS    string
	dstNS    string
	dst      netip.Addr
	servers  *traffic.Servers
	baseline bool
}

func main() {
	duration := flag.Duration("duration", 2*time.Second, "length of one measurement")
	reps := flag.Int("reps", 5, "interleaved repetitions of every measurement")
	only := flag.String("tests", "stream,rr,crr", "which tests to run (comma separated)")
	pick := flag.String("scenarios", "", "which scenarios to measure, by key: a,b,c,c',d,e,f,c-nk,c'-nk (default all)")
	flag.Parse()
	tests = slices.DeleteFunc(tests, func(t test) bool { return !slices.Contains(strings.Split(*only, ","), t.key) })
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// An interrupt stops between measurements, so that the namespaces
	// and mounts are still removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	want := func(key string) bool { return *pick == "" || slices.Contains(strings.Split(*pick, ","), key) }
	if err := run(ctx, log, *duration, *reps, want); err != nil {
		fmt.Fprintln(os.Stderr, "bench/datapath:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, d time.Duration, reps int, want func(key string) bool) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates namespaces and loads BPF programs")
	}
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	build := func(o dptest.Options) (*dptest.Cluster, error) {
		c, err := dptest.New(o)
		if err != nil {
			return nil, err
		}
		closers = append(closers, c.Close)
		return c, nil
	}

	log.Info("building clusters")
	plain, err := build(dptest.Options{Plain: true})
	if err != nil {
		return err
	}
	native, err := build(dptest.Options{Mode: spec.Native})
	if err != nil {
		return err
	}
	policy, err := buildPolicyScale(build, podlink.DeviceVeth)
	if err != nil {
		return err
	}
	tunnel, err := build(dptest.Options{Mode: spec.Tunnel})
	if err != nil {
		return err
	}
	legacy, err := build(dptest.Options{Mode: spec.Native, LegacyRouting: true})
	if err != nil {
		return err
	}
	floor, err := build(dptest.Options{Plain: true})
	if err != nil {
		return err
	}
	unwire, err := wireFloor(floor)
	if err != nil {
		return err
	}
	closers = append(closers, unwire)

	type podScenario struct {
		key, label string
		c          *dptest.Cluster
	}
	pods := []podScenario{
		{"b", "(b) pod to pod, kernel routing", plain},
		{"c", "(c) pod to pod, datapath native", native},
		{"c'", "(c') native, 10k policy entries", policy},
		{"d", "(d) pod to pod, datapath tunnel", tunnel},
		{"e", "(e) native, legacy host routing", legacy},
		{"f", "(f) floor: veth, bare redirects", floor},
	}
	nk, nkPolicy, err := buildNetkit(build)
	switch {
	case errors.Is(err, podlink.ErrNetkitUnsupported):
		log.Warn("no (c-nk) and (c'-nk): this kernel cannot make netkit devices", "error", err)
	case err != nil:
		return err
	default:
		pods = append(pods, podScenario{"c-nk", "(c-nk) native, netkit pods", nk},
			podScenario{"c'-nk", "(c'-nk) netkit, 10k policy entries", nkPolicy})
	}

	var scenarios []scenario
	// Without (a), as when profiling one scenario, ratios are to the
	// first one measured.
	if want("a") {
		a := scenario{key: "a", name: "(a) node to node", srcNS: plain.Nodes[0].NS, dstNS: plain.Nodes[1].NS,
			dst: plain.Nodes[1].IP, baseline: true}
		if a.servers, err = startServers(a.dstNS, a.dst); err != nil {
			return err
		}
		scenarios = append(scenarios, a)
	}
	for _, x := range pods {
		if !want(x.key) {
			continue
		}
		src, dst := x.c.Nodes[0].Pods[0], x.c.Nodes[1].Pods[0]
		s := scenario{key: x.key, name: x.label, srcNS: src.NS, dstNS: dst.NS, dst: dst.IP}
		if s.servers, err = startServers(dst.NS, dst.IP); err != nil {
			return err
		}
		scenarios = append(scenarios, s)
	}
	for _, s := range scenarios {
		closers = append(closers, s.servers.Close)
		if err := traffic.TuneClient(s.srcNS); err != nil {
			return err
		}
	}
	return measure(ctx, log, scenarios, d, reps)
}

type builder func(dptest.Options) (*dptest.Cluster, error)

// buildPolicyScale is (c') with the given pod device.
func buildPolicyScale(build builder, device podlink.Device) (*dptest.Cluster, error) {
	c, err := build(dptest.Options{Mode: spec.Native, PolicyIngress: true, PodDevice: device})
	if err != nil {
		return nil, err
	}
	return c, loadPolicyScale(c)
}

// buildNetkit builds (c-nk) and (c'-nk); podlink.ErrNetkitUnsupported
// says the kernel has no netkit.
func buildNetkit(build builder) (nk, nkPolicy *dptest.Cluster, err error) {
	if nk, err = build(dptest.Options{Mode: spec.Native, PodDevice: podlink.DeviceNetkit}); err != nil {
		return nil, nil, err
	}
	if nkPolicy, err = buildPolicyScale(build, podlink.DeviceNetkit); err != nil {
		return nil, nil, err
	}
	return nk, nkPolicy, nil
}

// loadPolicyScale gives the server pod of (c') 10,000 identities in the
// ipcache and 10,000 policy entries, one of which admits the client.
func loadPolicyScale(c *dptest.Cluster) error {
	client, server := c.Nodes[0].Pods[0], c.Nodes[1].Pods[0]
	maps := c.Nodes[1].DP.Maps()
	desired := c.IPCacheFor(c.Nodes[1])
	entries := []spec.PolicyEntry{{Direction: spec.Ingress, Identity: client.Identity, Protocol: 6}}
	for i := range policyScale - 1 {
		id := identity.NumericIdentity(20000 + i)
		a := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
		desired[netip.PrefixFrom(a, 32)] = spec.IPCacheEntry{Identity: id, TunnelEndpoint: c.Nodes[0].IP}
		entries = append(entries, spec.PolicyEntry{Direction: spec.Ingress, Identity: id, Protocol: 6,
			Port: uint16(1000 + i%5000)})
	}
	if err := maps.SyncIPCache(desired); err != nil {
		return err
	}
	if err := maps.SetPolicy(server.ID, entries); err != nil {
		return err
	}
	return nil
}

type test struct {
	key  string
	name string
	unit string
	run  func(s scenario, d time.Duration) (float64, error)
}

var tests = []test{
	{"stream", "TCP stream", "Mbit/s", streamRate},
	{"rr", "TCP request/response", "trans/s", rrRate},
	{"crr", "TCP connect/request/close", "conn/s", crrRate},
}

func measure(ctx context.Context, log *slog.Logger, scenarios []scenario, d time.Duration, reps int) error {
	results := make([][][]float64, len(scenarios))
	for i := range results {
		results[i] = make([][]float64, len(tests))
	}
	for r := range reps {
		log.Info("repetition", "n", r+1, "of", reps)
		for ti, t := range tests {
			for si, s := range scenarios {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("interrupted: %w", err)
				}
				v, err := t.run(s, d)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", s.name, t.name, err)
				}
				results[si][ti] = append(results[si][ti], v)
			}
		}
	}
	report(os.Stdout, scenarios, results, d, reps)
	return nil
}
