// Command hubble benchmarks what Hubble costs, in one run on one machine,
// on two-node datapaths in namespaces (internal/datapath/dptest). With
// Hubble on, an agent process of the benchmark's own (agent.go) runs each
// node's event path as cilium-agent does, apart from the process that
// makes the traffic: the monitor hub reading the node's pinned events
// ring buffer, a subscription, and pkg/hubble.ReadEvents making flows
// into a ring of the agent's default capacity.
//
//   - Cost: pod-to-pod TCP throughput and connect/request/close rate
//     across nodes with Hubble on (traces at medium aggregation, the
//     agent process running) against off (no traces, no agent process),
//     interleaved repetitions, paired ratios with 95% intervals (target:
//     at least 0.95, a cost of at most 5 %).
//   - Load: UDP request/response at a paced rate that offers 10,000
//     events per second to each node (aggregation none: every packet is
//     traced); the flows made against the events offered (target: none
//     lost; the rings here hold 65,535 flows, so that every record of
//     the load, flow or loss, can be counted), the agent process's CPU
//     per 1,000 flows/s, and the traffic's process's CPU with Hubble on
//     against off (the datapath's emitting runs in it).
//   - Memory: the heap of a full ring, of the default capacity and of
//     the largest (65,535), filled with copies of the load's flows.
//
// It needs root.
package main

import (
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
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/hubble/container"
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
	cpuProfile := flag.String("cpuprofile", "", "write the run's CPU profile here, and the agent process's to this path with .agent added")
	agent := flag.Bool("agent", false, "be the agent process (the benchmark starts it)")
	flag.Parse()
	if *agent {
		if err := runAgent(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench/hubble agent:", err)
			os.Exit(1)
		}
		return
	}
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
	// The agent process of the cost part profiles itself beside the run.
	agentProfile := ""
	if *cpuProfile != "" {
		agentProfile = *cpuProfile + ".agent"
	}
	if err := run(log, os.Stdout, *reps, *dur, *rate, *loadFor, *readers, agentProfile); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench/hubble:", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, out io.Writer, reps int, dur time.Duration, rate int, loadFor time.Duration, readers bool,
	agentProfile string) error {
	medium := spec.Traces{Enabled: true, Aggregation: spec.AggregationMedium,
		ReportFlags: spec.DefaultReportFlags, ReportInterval: spec.DefaultReportInterval}
	off, err := newBed(spec.Traces{}, false, ringCapacity, "")
	if err != nil {
		return err
	}
	defer off.close()
	on, err := newBed(medium, readers, ringCapacity, agentProfile)
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
	if readers {
		counts, err := on.agent.ask(askCounts)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "flows made on the receiving node during the runs with Hubble on: %d; the agent process took %.1f s of CPU\n",
			counts.Nodes[1].Written, counts.CPU.Seconds())
	}
	on.close()
	off.close()

	return loadPart(log, out, rate, loadFor)
}

// loadPart offers rate events per second to each node, first with Hubble
// off and then on, and reports what was lost and the CPU it took.
func loadPart(log *slog.Logger, out io.Writer, rate int, d time.Duration) error {
	every := spec.Traces{Enabled: true, Aggregation: spec.AggregationNone}
	type result struct {
		exchanges int
		cpu       time.Duration // the traffic's process, where the datapath runs too
		agentCPU  time.Duration
		elapsed   time.Duration
	}
	var res [2]result
	var on *bed
	var counts agentReply // the agent's after the load with Hubble on
	for i, hubbleOn := range []bool{false, true} {
		traces := spec.Traces{}
		if hubbleOn {
			traces = every
		}
		b, err := newBed(traces, hubbleOn, largestRing, "")
		if err != nil {
			return err
		}
		var before agentReply
		if hubbleOn {
			if before, err = b.agent.ask(askCounts); err != nil {
				b.close()
				return err
			}
		}
		log.Info("load", "hubble", hubbleOn, "events-per-s-per-node", rate)
		cpu0, t0 := cpuTime(), time.Now()
		// Two percent over, so that the rate a whole run offers (its
		// start and end included) is not below the one asked for.
		n, err := b.udpLoad(rate*102/100/eventsPerExchange, d)
		res[i] = result{exchanges: n, cpu: cpuTime() - cpu0, elapsed: time.Since(t0)}
		if err != nil {
			b.close()
			return err
		}
		if !hubbleOn {
			b.close()
			continue
		}
		on = b
		defer on.close()
		// The agent catches up with what the ring buffer holds.
		time.Sleep(time.Second)
		if counts, err = b.agent.ask(askCounts); err != nil {
			return err
		}
		res[i].agentCPU = counts.CPU - before.CPU
	}
	fmt.Fprintf(out, "\nLoad: UDP request/response, %d replies in %s, every packet traced (aggregation none); each exchange is "+
		"three events a node in tunnel mode (the packet out or in, and the VXLAN packet of the one that comes in).\n",
		res[1].exchanges, d.Round(time.Millisecond))
	var offered uint64
	for i, n := range on.c.Nodes {
		c := counts.Nodes[i]
		if c.Overflowed {
			return fmt.Errorf("the load's %d records overflowed %s's ring: shorten -load", c.Written, n.Name)
		}
		offered += c.Flows + c.Lost
		fmt.Fprintf(out, "%s: %.0f events/s offered (%d), %d lost; %d deliveries traced for %d replies; target: none lost at %d events/s: %s\n",
			n.Name, float64(c.Flows+c.Lost)/res[1].elapsed.Seconds(), c.Flows+c.Lost, c.Lost, c.Deliveries, res[1].exchanges, rate,
			verdict(c.Lost == 0 && c.Deliveries >= uint64(res[1].exchanges) && float64(c.Flows)/res[1].elapsed.Seconds() >= float64(rate)))
	}
	offered /= uint64(len(on.c.Nodes))
	flowsPerSec := float64(offered) / res[1].elapsed.Seconds()
	share := func(cpu, elapsed time.Duration) float64 { return 100 * cpu.Seconds() / elapsed.Seconds() }
	// The agent process's CPU is all Hubble's; the traffic's process
	// with Hubble on against off is the datapath's emitting (the BPF
	// programs run in the senders' and softirq's time).
	agent := share(res[1].agentCPU, res[1].elapsed)
	fmt.Fprintf(out, "agent process (both nodes' readers and parsers): %.1f%% of a core for %.0f flows/s per node: "+
		"%.2f%% of a core per 1,000 flows/s of a node\n", agent, flowsPerSec, agent/(2*flowsPerSec/1000))
	fmt.Fprintf(out, "traffic's process (with the datapath's emitting): %.1f%% of a core with Hubble off, %.1f%% on\n",
		share(res[0].cpu, res[0].elapsed), share(res[1].cpu, res[1].elapsed))

	mem, err := on.agent.ask(askMemory)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s\n", strings.Join(mem.Memory, "\n"))
	return nil
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
func memoryPart(out io.Writer, full *container.Ring) error {
	var flows []*flow.Flow
	oldest, next := full.Bounds()
	for p := oldest; p < next; p++ {
		if ev, _, _ := full.At(p); ev.Flow != nil {
			flows = append(flows, ev.Flow)
		}
	}
	if len(flows) == 0 {
		return fmt.Errorf("no flows to fill the rings with")
	}
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
// server pod on the second; with hubble, an agent process runs each
// node's event path.
type bed struct {
	c              *dptest.Cluster
	client, server *dptest.Pod
	servers        *traffic.Servers
	udp            io.Closer
	agent          *agentProc // nil with Hubble off
	closed         bool
}

func newBed(traces spec.Traces, hubbleOn bool, capacity int, profile string) (b *bed, err error) {
	c, err := dptest.New(dptest.Options{Mode: spec.Tunnel, PodsPerNode: 1, Traces: traces})
	if err != nil {
		return nil, err
	}
	b = &bed{c: c, client: c.Nodes[0].Pods[0], server: c.Nodes[1].Pods[0]}
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
	if hubbleOn {
		b.agent, err = startAgent(c, capacity, profile)
	}
	return b, err
}

func (b *bed) dial(port int) traffic.Dial {
	return traffic.DialFrom(b.client.NS, netip.AddrPortFrom(b.server.IP, uint16(port)))
}

// udpLoad makes perSec one-byte UDP exchanges a second for d, from the
// client to the server, and returns how many replies came back. A
// datagram the stack drops (a full socket buffer on a busy machine)
// loses its exchange, and the load goes on.
func (b *bed) udpLoad(perSec int, d time.Duration) (int, error) {
	var conn net.Conn
	err := netnamespace.Do(b.client.NS, func() (err error) {
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
	if b.agent != nil {
		if err := b.agent.close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench/hubble: the agent process:", err)
		}
	}
	for _, c := range []io.Closer{b.servers, b.udp} {
		if c != nil {
			c.Close()
		}
	}
	b.c.Close()
}
