// Command l7 benchmarks the layer-7 proxy (pkg/proxy) in one run on one
// machine, on a two-node datapath in namespaces (internal/datapath/dptest)
// with the real BPF programs: node 1's proxy runs in node 1's namespace
// with its transparent sockets and the node's pinned ipcache, and the
// client pod's egress allows to the server pods go to it when their
// policy entries carry its port. Each figure is against a baseline
// measured in the same run, the same pods with the same entry without the
// proxy's port, in interleaved repetitions (see README.md).
//
//   - HTTP: request rate on 8 kept-alive HTTP/1.1 connections and p50/p99
//     on one, through the proxy (a policy of a few HTTP rules that allow
//     the requests) against L4 policy only, to a server pod on the
//     client's node and on the other node. Targets: rate at least 0.5 of
//     L4 only; p50 added at most 150 µs.
//   - DNS: lookup p99 through the DNS proxy against direct, from a stub
//     resolver's socket per lookup to a small authoritative server pod,
//     with the proxy's Learn a no-op and telling an agent over its unix
//     socket. Target: at most 1 ms added.
//   - Memory: the heap of the proxy's policy with 1,000 DNS rules, of the
//     agent's name cache with 10,000 learned IPs, and of the policy
//     engine with 1,000 FQDN selectors and 10,000 learned IPs, against
//     the same with none, per selector and per IP. No target.
//
// Before measuring it checks that the proxied paths go through the proxy
// and the others do not, and every run checks it again by the proxy's
// records. It needs root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// options are the flags.
type options struct {
	parts           []string
	mode            spec.RoutingMode
	reps, conns     int
	rateFor, latFor time.Duration
	dnsFor          time.Duration
	profile         string
}

func main() {
	var o options
	parts := flag.String("parts", "http,dns,memory", "what to run: http, dns, memory")
	mode := flag.String("mode", "native", "the cluster's routing mode: native or tunnel")
	flag.IntVar(&o.reps, "reps", 5, "interleaved repetitions of each measurement")
	flag.IntVar(&o.conns, "conns", 8, "kept-alive connections of the HTTP rate")
	flag.DurationVar(&o.rateFor, "rate-duration", 3*time.Second, "each HTTP rate run")
	flag.DurationVar(&o.latFor, "latency-duration", 2*time.Second, "each HTTP latency run")
	flag.DurationVar(&o.dnsFor, "dns-duration", 2*time.Second, "each DNS latency run")
	flag.StringVar(&o.profile, "cpuprofile", "", "write the proxy process's CPU profile here")
	child := flag.Bool("proxy", false, "be the proxy process (the benchmark starts it)")
	flag.Parse()
	if *child {
		if err := runProxy(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench/l7 proxy:", err)
			os.Exit(1)
		}
		return
	}
	o.parts = strings.Split(*parts, ",")
	var err error
	if o.mode, err = spec.ParseRoutingMode(*mode); err != nil {
		fmt.Fprintln(os.Stderr, "bench/l7:", err)
		os.Exit(2)
	}
	if os.Geteuid() != 0 && (o.want("http") || o.want("dns")) {
		fmt.Fprintln(os.Stderr, "bench/l7 needs root: it loads BPF programs and makes network namespaces")
		os.Exit(1)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/l7:", err)
		os.Exit(1)
	}
}

func (o options) want(part string) bool { return slices.Contains(o.parts, part) }

func run(log *slog.Logger, out io.Writer, o options) error {
	fmt.Fprintf(out, "load average at the start: %s\n", loadAverage())
	if o.want("memory") {
		log.Info("memory")
		figs, err := memoryPart(o.reps)
		if err != nil {
			return err
		}
		memoryReport(out, figs, learnCost(1000))
	}
	if o.want("http") || o.want("dns") {
		if err := trafficParts(log, out, o); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "load average at the end: %s\n", loadAverage())
	return nil
}

// trafficParts runs the HTTP and DNS parts on one bed.
func trafficParts(log *slog.Logger, out io.Writer, o options) (err error) {
	b, err := newBed(o.mode, o.profile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.close()) }()
	log.Info("checking the paths")
	checks, err := b.checkPaths()
	if err != nil {
		return err
	}
	rs := newResults(b.servers)
	for rep := range o.reps {
		// The paths take turns at going first, so that a drift of the
		// machine weighs on all alike.
		order := []path{pathL4, pathProxy}
		if o.want("http") {
			order = append(order, pathRelay)
		}
		order = append(order[rep%len(order):], order[:rep%len(order)]...)
		for i, s := range b.servers {
			for _, p := range order {
				log.Info("measure", "rep", rep+1, "server", s.where, "path", p)
				r, err := b.measure(o, s, p, rep)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", s.where, p, err)
				}
				rs.add(o, i, p, r)
			}
		}
	}
	checks = append(checks, fmt.Sprintf("in every run the proxy recorded each request and lookup of the proxied paths (%d HTTP, %d DNS in all) "+
		"and none of the others, and every one it recorded was forwarded; the agent was told of the %d answers Learn had to tell it of (each with a TTL of 0, a run's first with a TTL)",
		rs.sentHTTP, rs.sentDNS, rs.told))
	checks = append(checks, b.accessLogCheck())
	if o.want("http") {
		httpReport(out, rs.http, o.conns, o.rateFor, o.latFor)
	}
	if o.want("dns") {
		dnsReport(out, rs.dns, o.dnsFor)
	}
	checksReport(out, checks)
	return nil
}

// results are the traffic parts' runs, by server, and what the proxied
// runs sent.
type results struct {
	http                    []httpPlace
	dns                     []dnsPlace
	sentHTTP, sentDNS, told int64
}

func newResults(servers []*server) *results {
	rs := &results{http: make([]httpPlace, len(servers)), dns: make([]dnsPlace, len(servers))}
	for i, s := range servers {
		rs.http[i].where, rs.dns[i].where = s.where, s.where
	}
	return rs
}

// add files run r on path p to server i.
func (rs *results) add(o options, i int, p path, r runFigures) {
	if p == pathL4 {
		if o.want("http") {
			rs.http[i].l4 = append(rs.http[i].l4, r.http)
		}
		if o.want("dns") {
			rs.dns[i].direct = append(rs.dns[i].direct, r.dnsDirect)
		}
		return
	}
	if p == pathRelay {
		rs.http[i].relay = append(rs.http[i].relay, r.http)
		return
	}
	rs.sentHTTP, rs.sentDNS, rs.told = rs.sentHTTP+r.httpSent, rs.sentDNS+r.dnsSent, rs.told+r.told
	if o.want("http") {
		rs.http[i].proxy = append(rs.http[i].proxy, r.http)
		rs.http[i].cpu = append(rs.http[i].cpu, perItem(r.httpCPU, r.httpSent))
	}
	if o.want("dns") {
		for w := range learnWays {
			rs.dns[i].proxied[w] = append(rs.dns[i].proxied[w], r.dnsProxied[w])
		}
		rs.dns[i].cpu = append(rs.dns[i].cpu, perItem(r.dnsCPU, r.dnsSent))
	}
}

// checkPaths makes sure, before measuring, that each path goes where it
// claims: through the proxy, a request is recorded by the proxy and
// reaches the server from the client pod's address (the proxy's
// transparent upstream), a lookup too; without it, neither is recorded.
func (b *bed) checkPaths() ([]string, error) {
	if err := b.setPath(pathProxy); err != nil {
		return nil, err
	}
	// The proxy process loaded its policy; its sockets may open a
	// moment later.
	first := b.servers[0]
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := httpFrom(b.client.NS, first.pod.IP)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the proxy does not answer: %w", err)
		}
	}
	for _, p := range []path{pathProxy, pathRelay, pathL4} {
		if err := b.setPath(p); err != nil {
			return nil, err
		}
		for _, s := range b.servers {
			before, err := b.counts()
			if err != nil {
				return nil, err
			}
			served := s.http.requests.Load()
			from, err := httpFrom(b.client.NS, s.pod.IP)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", s.where, p, err)
			}
			if from != b.client.IP {
				return nil, fmt.Errorf("%s, %s: the server saw the request from %s, not the client pod %s", s.where, p, from, b.client.IP)
			}
			if n := s.http.requests.Load() - served; n != 1 {
				return nil, fmt.Errorf("%s, %s: the server saw %d requests, want 1", s.where, p, n)
			}
			if _, err := newResolver(b.client.NS, s.pod.IP, b.nextName(), len(benchAddrs)).lookup(); err != nil {
				return nil, fmt.Errorf("%s, %s: lookup: %w", s.where, p, err)
			}
			after, err := b.counts()
			if err != nil {
				return nil, err
			}
			if err := checkSeen(p, before.Counts, after.Counts, 1, 1); err != nil {
				return nil, fmt.Errorf("%s: %w", s.where, err)
			}
			if err := checkRelayed(p, before, after); err != nil {
				return nil, fmt.Errorf("%s: %w", s.where, err)
			}
		}
	}
	return []string{"before measuring, a request and a lookup to each server went through the proxy with the proxy's port and not without, " +
		"a request through the relay with the relay's port, the server seeing the client pod's address every way"}, nil
}

// runFigures are one run's figures on one path to one server.
type runFigures struct {
	http                    httpRun
	dnsDirect               latency
	dnsProxied              [learnWays]latency
	httpSent, dnsSent, told int64
	httpCPU, dnsCPU         time.Duration // the proxy process's
}

// measure runs the HTTP rate and latency and the DNS lookups on path p to
// s, and checks by the proxy's records that they went where p says.
func (b *bed) measure(o options, s *server, p path, rep int) (r runFigures, err error) {
	if err := b.setPath(p); err != nil {
		return r, err
	}
	before, err := b.counts()
	if err != nil {
		return r, err
	}
	toldBefore, wantTold := b.agent.told.Load(), int64(0)
	if o.want("http") {
		rate, n, err := httpRate(b.client.NS, s.pod.IP, o.conns, o.rateFor)
		if err != nil {
			return r, fmt.Errorf("HTTP rate: %w", err)
		}
		lat, m, err := httpLatency(b.client.NS, s.pod.IP, o.latFor)
		if err != nil {
			return r, fmt.Errorf("HTTP latency: %w", err)
		}
		r.http, r.httpSent = httpRun{rate: rate, lat: latencyOf(lat)}, n+m
	}
	mid, err := b.counts()
	if err != nil {
		return r, err
	}
	r.httpCPU = mid.CPU - before.CPU
	if o.want("dns") {
		lookups := func(w learnWay) (latency, error) {
			if _, err := b.proxy.ask(w.request()); err != nil {
				return latency{}, err
			}
			b.agent.full.Store(w == learnEachFull)
			b.zone.ttl.Store(w.ttl())
			lat, err := dnsLatency(newResolver(b.client.NS, s.pod.IP, b.nextName(), len(benchAddrs)), o.dnsFor)
			r.dnsSent += int64(len(lat))
			wantTold += w.told(len(lat))
			return latencyOf(lat), err
		}
		if p == pathL4 {
			r.dnsDirect, err = lookups(learnNone)
		}
		// Learn's ways take turns at going first too.
		for k := 0; p == pathProxy && k < learnWays && err == nil; k++ {
			w := learnWay((k + rep) % learnWays)
			r.dnsProxied[w], err = lookups(w)
		}
		if err != nil {
			return r, fmt.Errorf("DNS: %w", err)
		}
	}
	after, err := b.counts()
	if err != nil {
		return r, err
	}
	r.dnsCPU = after.CPU - mid.CPU
	if err := checkSeen(p, before.Counts, after.Counts, r.httpSent, r.dnsSent); err != nil {
		return r, err
	}
	if err := checkRelayed(p, before, after); err != nil {
		return r, err
	}
	r.told = b.agent.told.Load() - toldBefore
	if r.told != wantTold {
		return r, fmt.Errorf("the agent was told of %d lookups, want %d (each answer with a TTL of 0, the first with a TTL)", r.told, wantTold)
	}
	return r, nil
}

// accessLogCheck says how many of the proxy's request records its
// access log brought to the agent's side: its Sender drops what the
// agent does not read in time rather than hold a request up.
func (b *bed) accessLogCheck() string {
	time.Sleep(500 * time.Millisecond) // the last records on their way
	r, err := b.counts()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("the access log brought %d of the proxy's %d request records to the agent's socket", b.agent.received.Load(),
		r.Counts.HTTP+r.Counts.DNS)
}

func perItem(d time.Duration, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

// loadAverage is the machine's load over 1, 5 and 15 minutes.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
