// Command hubble benchmarks what Hubble costs, in one run on one machine,
// on two-node datapaths in namespaces (internal/datapath/dptest) whose
// nodes each run the agent's own event path: the monitor hub reading the
// events ring buffer, a subscription, and pkg/hubble.ReadEvents making
// flows into a ring of the agent's default capacity.
//
//   - Cost: pod-to-pod TCP throughput and connect/request/close rate
//     across nodes with Hubble on (traces at medium aggregation, the
//     readers running) against off (no traces, no readers), interleaved
//     repetitions, paired ratios with 95% intervals (target: at least
//     0.95, a cost of at most 5 %).
//   - Load: UDP request/response at a paced rate that offers 10,000
//     events per second to each node (aggregation none: every packet is
//     traced); the flows made against the events offered (target: none
//     lost; the rings here hold 65,535 flows, so that every record of
//     the load, flow or loss, can be counted), and the process's CPU per
//     1,000 flows/s over the same load with Hubble off.
//   - Memory: the heap of a full ring, of the default capacity and of
//     the largest (65,535), filled with copies of the load's flows.
//
// It needs root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/bench/internal/stats"
	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/inns"
	"github.com/cilium-go/cilium/pkg/hubble"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/monitor"
	"github.com/cilium-go/cilium/pkg/policy"
)

var costTarget = stats.Target{Value: 0.95}

const (
	streamPort, echoPort, udpPort = 5001, 5002, 5003
	ringCapacity                  = 4095  // the agent's default
	eventsPerExchange             = 3     // a node's, in the load part
	largestRing                   = 65535 // --hubble-event-buffer-capacity's largest
)

func main() {
	reps := flag.Int("reps", 5, "interleaved repetitions of Hubble off and on")
	dur := flag.Duration("duration", 3*time.Second, "each throughput and connect/request/close measurement")
	rate := flag.Int("events", 10000, "events per second offered to each node in the load part")
	readers := flag.Bool("readers", true, "run the agents' readers with Hubble on; false leaves the datapath's share of the cost")
	loadFor := flag.Duration("load", 6*time.Second, "how long the load part offers them (at most 65,535 events a node)")
	cpuProfile := flag.String("cpuprofile", "", "write the run's CPU profile here")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/hubble:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench/hubble needs root: it loads BPF programs and makes network namespaces")
		os.Exit(1)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Stdout, *reps, *dur, *rate, *loadFor, *readers); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench/hubble:", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, out io.Writer, reps int, dur time.Duration, rate int, loadFor time.Duration, readers bool) error {
	medium := datapath.Traces{Enabled: true, Aggregation: datapath.AggregationMedium,
		ReportFlags: datapath.DefaultReportFlags, ReportInterval: datapath.DefaultReportInterval}
	off, err := newBed(datapath.Traces{}, false, ringCapacity)
	if err != nil {
		return err
	}
	defer off.close()
	on, err := newBed(medium, readers, ringCapacity)
	if err != nil {
		return err
	}
	defer on.close()

	var streamOff, streamOn, crrOff, crrOn []float64
	for rep := range reps {
		// Alternate which goes first, so that a drift of the machine
		// weighs on both alike.
		order := []*bed{off, on}
		if rep%2 == 1 {
			order = []*bed{on, off}
		}
		for _, b := range order {
			log.Info("cost", "rep", rep+1, "hubble", b == on)
			s, err := traffic.StreamRate(b.dial(streamPort), b.servers.Received, dur)
			if err != nil {
				return fmt.Errorf("stream: %w", err)
			}
			c, err := traffic.RunCRR(b.dial(echoPort), dur)
			if err != nil {
				return fmt.Errorf("connect/request/close: %w", err)
			}
			if b == on {
				streamOn, crrOn = append(streamOn, s), append(crrOn, c.Rate())
			} else {
				streamOff, crrOff = append(streamOff, s), append(crrOff, c.Rate())
			}
		}
	}
	fmt.Fprintf(out, "\nHubble's cost: two nodes (tunnel), a pod on each; on = traces at medium aggregation and each node's agent path "+
		"(monitor hub, subscription, flows into a ring of %d); off = neither. %d interleaved repetitions of %s.\n", ringCapacity, reps, dur)
	fmt.Fprintf(out, "%-28s %14s %14s   %s\n", "", "off (median)", "on (median)", "on/off  [95% CI]   target")
	for _, m := range []struct {
		name    string
		off, on []float64
		unit    string
	}{{"TCP stream", streamOff, streamOn, "Mbit/s"}, {"connect/request/close", crrOff, crrOn, "conn/s"}} {
		r := stats.PairedRatio(m.on, m.off)
		fmt.Fprintf(out, "%-28s %9.0f %-4s %9.0f %-4s   %s   %s: %s\n", m.name, stats.Median(m.off), m.unit, stats.Median(m.on), m.unit,
			r, costTarget, costTarget.Judge(r))
	}
	fmt.Fprintf(out, "by repetition, off/on: stream %s; connect/request/close %s\n", perRep(streamOff, streamOn), perRep(crrOff, crrOn))
	fmt.Fprintf(out, "flows made on the receiving node during the runs with Hubble on: %d\n", on.written(1))
	on.close()
	off.close()

	return loadPart(log, out, rate, loadFor)
}

// loadPart offers rate events per second to each node, first with Hubble
// off and then on, and reports what was lost and the CPU it took.
func loadPart(log *slog.Logger, out io.Writer, rate int, d time.Duration) error {
	every := datapath.Traces{Enabled: true, Aggregation: datapath.AggregationNone}
	type result struct {
		exchanges int
		cpu       time.Duration
		elapsed   time.Duration
	}
	var res [2]result
	var on *bed
	for i, hubbleOn := range []bool{false, true} {
		traces := datapath.Traces{}
		if hubbleOn {
			traces = every
		}
		b, err := newBed(traces, hubbleOn, largestRing)
		if err != nil {
			return err
		}
		log.Info("load", "hubble", hubbleOn, "events/s per node", rate)
		cpu0, t0 := cpuTime(), time.Now()
		// Two percent over, so that the rate a whole run offers (its
		// start and end included) is not below the one asked for.
		n, err := b.udpLoad(rate*102/100/eventsPerExchange, d)
		res[i] = result{exchanges: n, cpu: cpuTime() - cpu0, elapsed: time.Since(t0)}
		if err != nil {
			b.close()
			return err
		}
		if hubbleOn {
			on = b
			// The readers catch up with what the ring buffer holds.
			time.Sleep(time.Second)
		} else {
			b.close()
		}
	}
	defer on.close()
	fmt.Fprintf(out, "\nLoad: UDP request/response, %d replies in %s, every packet traced (aggregation none); each exchange is "+
		"three events a node in tunnel mode (the packet out or in, and the VXLAN packet of the one that comes in).\n",
		res[1].exchanges, d.Round(time.Millisecond))
	var offered uint64
	for i, n := range on.c.Nodes {
		// Every reply that came back went into the server's endpoint as
		// a request and into the client's as a reply, and each such
		// delivery is traced: a lost event shows as one missing here.
		port := func(f *flow.Flow) uint32 { return f.GetL4().GetUDP().GetDestinationPort() }
		into := func(f *flow.Flow) bool {
			return f.GetTraceObservationPoint() == flow.TraceObservationPoint_TO_ENDPOINT &&
				(i == 1 && port(f) == udpPort || i == 0 && f.GetL4().GetUDP().GetSourcePort() == udpPort)
		}
		made, delivered, lost := on.tally(i, into)
		offered += made + lost
		fmt.Fprintf(out, "%s: %.0f events/s offered (%d), %d lost; %d deliveries traced for %d replies; target: none lost at %d events/s: %s\n",
			n.Name, float64(made+lost)/res[1].elapsed.Seconds(), made+lost, lost, delivered, res[1].exchanges, rate,
			verdict(lost == 0 && delivered >= uint64(res[1].exchanges) && float64(made)/res[1].elapsed.Seconds() >= float64(rate)))
	}
	offered /= uint64(len(on.c.Nodes))
	flowsPerSec := float64(offered) / res[1].elapsed.Seconds()
	// The CPU each run took, as a share of a core, on with off taken out:
	// the agents' readers and parsers, and the datapath's emitting.
	extra := res[1].cpu.Seconds()/res[1].elapsed.Seconds() - res[0].cpu.Seconds()/res[0].elapsed.Seconds()
	fmt.Fprintf(out, "process CPU: %.1f%% of a core with Hubble off, %.1f%% on, for %.0f flows/s per node (2 nodes): "+
		"%.2f%% of a core per 1,000 flows/s of a node\n", 100*res[0].cpu.Seconds()/res[0].elapsed.Seconds(),
		100*res[1].cpu.Seconds()/res[1].elapsed.Seconds(), flowsPerSec, 100*extra/(2*flowsPerSec/1000))

	return memoryPart(out, on)
}

func perRep(off, on []float64) string {
	var parts []string
	for i := range min(len(off), len(on)) {
		parts = append(parts, fmt.Sprintf("%.0f/%.0f", off[i], on[i]))
	}
	return strings.Join(parts, " ")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// memoryPart measures the heap of a full ring of each size, filled with
// copies of the load's flows (each its own message, as the parser's).
func memoryPart(out io.Writer, b *bed) error {
	var flows []*flow.Flow
	oldest, next := b.rings[1].Bounds()
	for p := oldest; p < next; p++ {
		if ev, _, _ := b.rings[1].At(p); ev.Flow != nil {
			flows = append(flows, ev.Flow)
		}
	}
	if len(flows) == 0 {
		return fmt.Errorf("no flows to fill the rings with")
	}
	fmt.Fprintln(out)
	for _, capacity := range []int{ringCapacity, largestRing} {
		base := heap()
		r, err := container.NewRing(capacity)
		if err != nil {
			return err
		}
		t0 := time.Now()
		for i := range capacity {
			f := proto.Clone(flows[i%len(flows)]).(*flow.Flow)
			f.Time = timestamppb.New(t0.Add(time.Duration(i)))
			r.Write(container.Event{Flow: f})
		}
		full := heap() - base
		fmt.Fprintf(out, "Memory: a full ring of %d flows holds %.1f MiB of heap, %d bytes a flow\n", capacity, float64(full)/(1<<20),
			full/int64(capacity))
		runtime.KeepAlive(r)
	}
	return nil
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bed is a two-node datapath, a client pod on the first node and a
// server pod on the second; with hubble, each node runs the agent's
// event path.
type bed struct {
	c              *dptest.Cluster
	client, server *dptest.Pod
	servers        *traffic.Servers
	udp            io.Closer
	hubble         bool
	cancel         context.CancelFunc
	subs           []*monitor.Subscription
	rings          []*container.Ring
	closed         bool
}

func newBed(traces datapath.Traces, hubbleOn bool, capacity int) (b *bed, err error) {
	c, err := dptest.New(dptest.Options{Mode: spec.Tunnel, PodsPerNode: 1, Traces: traces})
	if err != nil {
		return nil, err
	}
	b = &bed{c: c, client: c.Nodes[0].Pods[0], server: c.Nodes[1].Pods[0], hubble: hubbleOn, cancel: func() {}}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if err = traffic.TuneClient(b.client.NS); err != nil {
		return b, err
	}
	if b.servers, err = traffic.StartServers(b.server.NS, b.server.IP, streamPort, echoPort); err != nil {
		return b, err
	}
	if b.udp, err = dptest.ServeUDPEcho(b.server.NS, b.server.IP, udpPort); err != nil {
		return b, err
	}
	if !hubbleOn {
		return b, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	log := slog.New(slog.DiscardHandler)
	for _, n := range c.Nodes {
		st := newState(c, n)
		hub := monitor.NewHub()
		// The agent's default queue: as many events as a default ring.
		sub := hub.Subscribe(ringCapacity + 1)
		ring, err := container.NewRing(capacity)
		if err != nil {
			return b, err
		}
		b.subs, b.rings = append(b.subs, sub), append(b.rings, ring)
		go hub.Read(ctx, n.DP)
		go hubble.ReadEvents(ctx, log, sub, parser.New(n.Name, st), ring, nil)
	}
	return b, nil
}

func (b *bed) dial(port int) traffic.Dial {
	return traffic.DialFrom(b.client.NS, netip.AddrPortFrom(b.server.IP, uint16(port)))
}

// written is how many records node i's ring took.
func (b *bed) written(i int) uint64 { return b.rings[i].Written() }

// tally counts node i's flows, those of them match accepts, and the
// events its records of loss name: the ring holds every record of the
// load.
func (b *bed) tally(i int, match func(*flow.Flow) bool) (flows, matched, lost uint64) {
	r := b.rings[i]
	oldest, next := r.Bounds()
	if oldest != 0 {
		panic(fmt.Sprintf("the load's %d records overflowed the ring: shorten -load", r.Written()))
	}
	for p := oldest; p < next; p++ {
		ev, _, _ := r.At(p)
		switch {
		case ev.Lost != nil:
			lost += ev.Lost.GetNumEventsLost()
		case match(ev.Flow):
			matched++
			flows++
		default:
			flows++
		}
	}
	return flows, matched, lost + b.subs[i].TakeLost()
}

// udpLoad makes perSec one-byte UDP exchanges a second for d, from the
// client to the server, and returns how many replies came back. A
// datagram the stack drops (a full socket buffer on a busy machine)
// loses its exchange, and the load goes on.
func (b *bed) udpLoad(perSec int, d time.Duration) (int, error) {
	var conn net.Conn
	err := inns.Do(b.client.NS, func() (err error) {
		conn, err = net.Dial("udp4", netip.AddrPortFrom(b.server.IP, udpPort).String())
		return err
	})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	buf := make([]byte, 1)
	sent, replies, t0 := 0, 0, time.Now()
	for time.Since(t0) < d {
		// Send what is due by now, in one burst, then read the replies
		// and wait for the next millisecond.
		due := int(float64(perSec)*time.Since(t0).Seconds()) + 1
		burst := due - sent
		for range burst {
			if _, err := conn.Write(buf); err != nil {
				return replies, err
			}
		}
		sent = due
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		for range burst {
			if _, err := conn.Read(buf); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				return replies, err
			}
			replies++
		}
		time.Sleep(time.Millisecond)
	}
	return replies, nil
}

func (b *bed) close() {
	if b == nil || b.closed {
		return
	}
	b.closed = true
	b.cancel()
	for _, c := range []io.Closer{b.servers, b.udp} {
		if c != nil {
			c.Close()
		}
	}
	b.c.Close()
}

// state answers the parser from the bed's pods, as the agent's tables do.
type state struct {
	byIP   map[netip.Addr]parser.Endpoint
	byID   map[uint16]parser.Endpoint
	labels map[identity.NumericIdentity][]string
}

// newState is node's view: its own pods by endpoint id, every pod by
// address.
func newState(c *dptest.Cluster, node *dptest.Node) *state {
	s := &state{byIP: map[netip.Addr]parser.Endpoint{}, byID: map[uint16]parser.Endpoint{}, labels: map[identity.NumericIdentity][]string{}}
	for _, p := range c.Pods() {
		ep := parser.Endpoint{ID: p.ID, Identity: p.Identity, Namespace: "bench", PodName: p.Name}
		s.byIP[p.IP] = ep
		if p.Node == node {
			s.byID[p.ID] = ep
		}
		s.labels[p.Identity] = []string{"k8s:app=" + p.Name}
	}
	return s
}

func (s *state) LocalEndpoint(id uint16) (parser.Endpoint, bool)   { e, ok := s.byID[id]; return e, ok }
func (s *state) EndpointByIP(a netip.Addr) (parser.Endpoint, bool) { e, ok := s.byIP[a]; return e, ok }
func (s *state) PolicyOrigins(uint32) []policy.Origin              { return nil }
func (s *state) IdentityLabels(id identity.NumericIdentity) ([]string, bool) {
	l, ok := s.labels[id]
	return l, ok
}
func (s *state) ServiceByRevNAT(uint16) (parser.Service, bool) {
	return parser.Service{}, false
}
