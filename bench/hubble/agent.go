package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/cilium/cilium/api/v1/flow"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/pkg/hubble"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/monitor"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
)

// The agent's event path runs in a process of its own, the benchmark's
// child, as it does in cilium-agent: it shares neither the Go scheduler
// nor the CPU accounting of the process that makes the traffic. The
// parent writes the child's configuration as a line of JSON on its
// stdin, then requests, one a line; the child answers each with a line
// of JSON on its stdout and exits when its stdin closes.

type agentConfig struct {
	Nodes    []agentNode
	Pods     []agentPod
	Capacity int    // each node's ring
	Profile  string // where the child writes its CPU profile, if set
}

type agentNode struct{ Name, PinDir string }

type agentPod struct {
	Name, Node string
	IP         netip.Addr
	ID         uint16
	Identity   identity.NumericIdentity
}

// Requests.
const (
	askCounts = "counts" // the process's CPU and each node's tally
	askMemory = "memory" // the heap of full rings
)

type agentReply struct {
	CPU    time.Duration // the child's CPU time so far
	Nodes  []nodeCounts
	Memory []string // askMemory's report, a line each
	Err    string
}

// nodeCounts are one node's records: the ring holds every record of
// the load part (its capacity is the largest), so that each flow and
// each loss is counted.
type nodeCounts struct {
	Written    uint64 // records the ring took
	Flows      uint64
	Deliveries uint64 // traces of the load's UDP into an endpoint
	Lost       uint64 // events that records of loss name, and the queue's
	Overflowed bool   // the ring wrapped: the tally is not whole
}

// agentProc is the parent's handle on the child.
type agentProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startAgent(c *dptest.Cluster, capacity int, profile string) (a *agentProc, err error) {
	cfg := agentConfig{Capacity: capacity, Profile: profile}
	for _, n := range c.Nodes {
		cfg.Nodes = append(cfg.Nodes, agentNode{Name: n.Name, PinDir: filepath.Join(n.BPFFSDir, "maps")})
	}
	for _, p := range c.Pods() {
		cfg.Pods = append(cfg.Pods, agentPod{Name: p.Name, Node: p.Node.Name, IP: p.IP, ID: p.ID, Identity: p.Identity})
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-agent")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent process: %w", err)
	}
	a = &agentProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	a.out.Buffer(nil, 1<<20)
	line, err := json.Marshal(cfg)
	if err == nil {
		_, err = fmt.Fprintf(in, "%s\n", line)
	}
	if err == nil {
		_, err = a.ask(askCounts) // the child is reading
	}
	if err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *agentProc) ask(req string) (agentReply, error) {
	var r agentReply
	if _, err := fmt.Fprintln(a.in, req); err != nil {
		return r, fmt.Errorf("agent process: %w", err)
	}
	if !a.out.Scan() {
		return r, fmt.Errorf("agent process: no answer to %s: %v", req, a.out.Err()) //nolint:errorlint // nil at EOF: shown, not wrapped
	}
	if err := json.Unmarshal(a.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("agent process: %w", err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("agent process: %s", r.Err)
	}
	return r, nil
}

func (a *agentProc) close() error {
	a.in.Close()
	return a.cmd.Wait()
}

// runAgent is the child: each node's monitor hub reading the node's
// pinned events ring buffer, a subscription of the agent's default
// queue, and pkg/hubble.ReadEvents making flows into a ring.
func runAgent(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	if !in.Scan() {
		return errors.New("no configuration on stdin")
	}
	var cfg agentConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if cfg.Profile != "" {
		f, err := os.Create(cfg.Profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	var subs []*monitor.Subscription
	var rings []*container.Ring
	for _, n := range cfg.Nodes {
		m, err := nodedatapath.OpenPinnedMaps(n.PinDir)
		if err != nil {
			return err
		}
		defer m.Close()
		hub := monitor.NewHub()
		// The agent's default queue: as many events as a default ring.
		sub := hub.Subscribe(ringCapacity + 1)
		ring, err := container.NewRing(cfg.Capacity)
		if err != nil {
			return err
		}
		subs, rings = append(subs, sub), append(rings, ring)
		go func() {
			if err := hub.Read(ctx, m); err != nil {
				fmt.Fprintln(os.Stderr, "bench/hubble agent:", n.Name, err)
			}
		}()
		go hubble.ReadEvents(ctx, log, sub, parser.New(n.Name, newState(cfg.Pods, n.Name), monitor.Clock), ring, nil)
	}
	enc := json.NewEncoder(stdout)
	for in.Scan() {
		reply := agentReply{CPU: cpuTime()}
		switch req := in.Text(); req {
		case askCounts:
			for i, r := range rings {
				reply.Nodes = append(reply.Nodes, tally(r, subs[i], i))
			}
		case askMemory:
			var out strings.Builder
			if err := memoryPart(&out, rings[1]); err != nil {
				reply.Err = err.Error()
			}
			reply.Memory = strings.Split(strings.TrimSpace(out.String()), "\n")
		default:
			reply.Err = fmt.Sprintf("no request %q", req)
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	return in.Err()
}

// tally counts the records of node i's ring. Every UDP reply of the load
// went into the server's endpoint (node 1) as a request and into the
// client's (node 0) as a reply, and each such delivery is traced: a lost
// event shows as one missing.
func tally(r *container.Ring, sub *monitor.Subscription, i int) nodeCounts {
	n := nodeCounts{Written: r.Written()}
	oldest, next := r.Bounds()
	n.Overflowed = oldest != 0
	for p := oldest; p < next; p++ {
		ev, _, _ := r.At(p)
		if ev.Lost != nil {
			n.Lost += ev.Lost.GetNumEventsLost()
			continue
		}
		n.Flows++
		f, udp := ev.Flow, ev.Flow.GetL4().GetUDP()
		if f.GetTraceObservationPoint() == flow.TraceObservationPoint_TO_ENDPOINT &&
			(i == 1 && udp.GetDestinationPort() == udpPort || i == 0 && udp.GetSourcePort() == udpPort) {
			n.Deliveries++
		}
	}
	n.Lost += sub.TakeLost()
	return n
}

// state answers the parser from the bed's pods, as the agent's tables do.
type state struct {
	byIP   map[netip.Addr]parser.Endpoint
	byID   map[uint16]parser.Endpoint
	labels map[identity.NumericIdentity][]string
}

// newState is node's view: its own pods by endpoint id, every pod by
// address.
func newState(pods []agentPod, node string) *state {
	s := &state{byIP: map[netip.Addr]parser.Endpoint{}, byID: map[uint16]parser.Endpoint{}, labels: map[identity.NumericIdentity][]string{}}
	for _, p := range pods {
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
func (s *state) PolicyOrigins(uint32) []parser.Policy              { return nil }
func (s *state) IdentityLabels(id identity.NumericIdentity) ([]string, bool) {
	l, ok := s.labels[id]
	return l, ok
}
func (s *state) ServiceByRevNAT(uint16) (parser.Service, bool) {
	return parser.Service{}, false
}
func (s *state) EndpointByNetNS(uint64) (uint16, netip.Addr, bool) { return 0, netip.Addr{}, false }
