package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// crrSeries is a measurement whose p50 and p99 are p, repetition by
// repetition.
func crrSeries(p ...float64) *series {
	return &series{p50: p, p99: p, rate: []float64{1000, 1000, 1000}}
}

// TestReport: the report judges the scale ratio as an upper bound on
// latency, the stream as a lower bound on throughput and the change
// latency by its p99's interval, and the lab part's proxies against
// cilium-go, with kube-proxy's histograms read as buckets.
func TestReport(t *testing.T) {
	o := options{reps: 3, duration: time.Second, scales: []int{10, 10000}, sockScales: []int{10},
		parts: "crr,sock,outside,stream,maglev,cp"}
	dp := &dpResults{crr: map[crrKey]*series{
		{podTC, 10}:    crrSeries(100, 110, 90),
		{cipTC, 10}:    crrSeries(100, 110, 90),
		{podTC, 10000}: crrSeries(100, 110, 90),
		{cipTC, 10000}: crrSeries(120, 132, 108), // 1.2 times @10: missed
		{podSock, 10}:  crrSeries(100, 110, 90),
		{cipSock, 10}:  crrSeries(100, 110, 90),
	}, stream: map[path]*series{
		podTC: {rate: []float64{1000, 1100, 900}},
		cipTC: {rate: []float64{990, 1089, 891}}, // 0.99: met
	}, streamScale: 10000, moved: map[spec.LBFlags][]float64{
		spec.LBMaglev: {0.11, 0.11, 0.11}, // 1.1 times 1/10: met
		0:             {0.9, 0.9, 0.9},
	}}
	for _, n := range o.scales {
		for _, p := range []path{podOut, npOut, vipOut, vipMgOut} {
			dp.crr[crrKey{p, n}] = crrSeries(100, 110, 90)
		}
	}
	cp := &cpResults{services: 10, backends: 40, rate: 100, program: time.Second, create: 500 * time.Millisecond}
	for i := range 1000 {
		cp.changes = append(cp.changes, time.Duration(i)*101*time.Microsecond) // p99 100.0ms [99.2, 100.6]
	}
	cp.updates = cp.changes
	lr := &labResults{modes: labModes, scales: []int{10, 10000}, crr: map[labKey]*series{}, rss: map[labKey]rss{},
		sync: map[string]*labSync{}}
	for _, n := range lr.scales {
		for _, m := range labModes {
			lr.crr[labKey{m.key, labPod, n}] = crrSeries(100, 110, 90)
		}
		lr.crr[labKey{"cilium-go", labCIP, n}] = crrSeries(100, 110, 90)
		lr.crr[labKey{"cilium-go", labCIPTC, n}] = crrSeries(100, 110, 90)
		lr.crr[labKey{"nftables", labCIP, n}] = crrSeries(90, 99, 81) // 0.9 times cilium-go: missed
	}
	lr.crr[labKey{"iptables", labCIP, 10}] = crrSeries(100, 110, 90)
	lr.crr[labKey{"iptables", labCIP, 10}].failed = 1
	lr.crr[labKey{"iptables", labCIP, 10}].errors = []string{"after 3.001s: dial tcp4 10.96.0.10:80: i/o timeout"}
	lr.crr[labKey{"iptables", labCIP, 10000}] = crrSeries(400, 440, 360) // 4 times cilium-go: met
	var afterCall []time.Duration
	for i := range 100 {
		afterCall = append(afterCall, time.Duration(i+1)*time.Millisecond)
	}
	lr.sync["cilium-go"] = &labSync{changes: 1000, rate: 100, latencies: cp.changes, afterCall: afterCall}
	prog := metrics{
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="0.25"}`: 0,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="1"}`:    50,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="2"}`:    99,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"}`: 100,
		`kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"}`:            100,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="0.25"}`: 7,
		`kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"}`:            7,
	}.histogram("kubeproxy_network_programming_duration_seconds")
	lr.sync["iptables"] = &labSync{changes: 100, rate: 100, programming: []histogram{prog}, syncs: []histogram{{}}}
	o.parts += ",lab"
	var b strings.Builder
	report(&b, o, dp, cp, lr)
	out := b.String()
	for _, want := range []string{
		"ClusterIP@10000 / ClusterIP@10, connect p50 <= 1.05        1.200  [1.200, 1.200]  missed",
		"ClusterIP@10000 / ClusterIP@10, connect p99 <= 1.05        1.200  [1.200, 1.200]  missed",
		"stream ClusterIP / pod IP >= 0.98                          0.990  [0.990, 0.990]  met",
		"EndpointSlice change to map, p99 <= 100ms",
		"undecided: the interval holds 100ms",
		"10  socket LB / pod IP from the same cgroup",
		"10000  LoadBalancer VIP, Maglev / random",
		"Maglev flows moved / ideal 1/N <= 1.20                     1.100  [1.100, 1.100]  met",
		"random                                  0.900   9.000  [9.000, 9.000]",
		"lab: iptables / cilium-go @10000, ClusterIP p50 >= 3.00    4.000  [4.000, 4.000]  met",
		"lab: nftables / cilium-go @10, ClusterIP p50 >= 1.00       0.900  [0.900, 0.900]  missed",
		"lab: change to every node's map, p99 <= 100ms",
		"a lower bound of the agents' share: p50 50.00 ms, p99 99.00 ms)",
		"failures @10, kube-proxy iptables, ClusterIP: after 3.001s: dial tcp4 10.96.0.10:80: i/o timeout",
		"trigger time -> rules written:  100 observed, p50 (0.25, 1] p99 (1, 2];  rule syncs:   0, p50 - p99 -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestOptions(t *testing.T) {
	ok := options{reps: 1, duration: time.Second, scales: []int{10, 10000}, sockScales: []int{10},
		cpServices: 10000, cpBackends: 4, cpRate: 100, labModes: "cilium-go,iptables", labScales: []int{10, 10000}}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.sockScales = []int{1000}
	if err := bad.validate(); err == nil {
		t.Error("a socket-LB scale not among the scales passed")
	}
	bad = ok
	bad.scales = []int{1, 10}
	if err := bad.validate(); err == nil {
		t.Error("a scale below the measured frontends passed")
	}
	bad = ok
	bad.labModes = "cilium-go,ipvs"
	if err := bad.validate(); err == nil {
		t.Error("an unknown proxy passed")
	}
}
