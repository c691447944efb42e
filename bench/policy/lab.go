package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/bench/internal/benchlab"
	"github.com/cilium-go/cilium/bench/internal/traffic"
	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// The lab part measures, on a real two-node cluster running cilium-go
// (`cilium-lab up`: a real API server, the lab's kubelet, cilium-go's agent
// and operator), how long a policy takes from its API write to enforcement,
// as probes see it: a client pod on each node connects to a server pod on
// each node, every pair in its own loop of connection attempts that give up
// after probeTimeout. Measured, with few and with many policies and
// identities present:
//   - allow: a CiliumNetworkPolicy admitting the clients is created; the
//     delay is from the create to the start of the first attempt that
//     connects, the slowest pair's;
//   - deny: it is deleted; the delay is to the start of the first of
//     deniedRun attempts in a row that fail, the slowest pair's;
//   - new pod: a client pod with labels no pod had (a new identity) starts
//     while a policy admits clients; the delay is from the moment its
//     container runs (the earliest it can send) to its first connection to
//     the server on each node.
// The load is filler identities (CiliumIdentities of no pod) and filler
// policies that each admit one of them into the servers on another port,
// so the servers' maps hold an entry per filler.

const (
	labNS        = "bench"
	serverPort   = 80
	fillerPort   = 8080
	probeTimeout = 5 * time.Millisecond
	deniedRun    = 3
	probePause   = time.Millisecond
	firstFiller  = 50000 // filler identity numbers, above what the agents allocate at first
	labWait      = time.Minute
)

// delayTarget bounds the p99 of each delay.
const delayTarget = 50 * time.Millisecond

// A labPhase is what one load measured.
type labPhase struct {
	policies, identities int
	allow, deny, newPod  []time.Duration // sorted
	// write is the API server's part of allow: the create call's time;
	// answered is the rest, the delay after its answer (the watch's and
	// the agents' part).
	write, answered []time.Duration
}

type labBed struct {
	*benchlab.Lab
	cilium  *client.Clientset
	servers []netip.Addr
	clients []string // each node's client pod's network namespace
	maps    []benchlab.Maps
	// serverEPs are the server pods' endpoint IDs, by node.
	serverEPs []uint16
	fillers   int
	newPods   int
	log       *slog.Logger
}

// labPart brings a lab up, measures with one filler and then with
// fillers of each, and takes the lab down.
func labPart(ctx context.Context, log *slog.Logger, bin string, flips, newPods, fillers int) (phases []labPhase, err error) {
	var closers []func() error
	defer func() {
		for _, c := range slices.Backward(closers) {
			err = errors.Join(err, c())
		}
	}()
	onClose := func(f func() error) { closers = append(closers, f) }
	log.Info("lab: starting a cluster")
	lab, err := benchlab.Up(bin, "bpol", onClose, "--routing-mode", "native", "--kube-proxy", "none")
	if err != nil {
		return nil, err
	}
	b := &labBed{Lab: lab, log: log}
	if b.cilium, err = client.NewForConfig(lab.Config); err != nil {
		return nil, err
	}
	if err := b.deploy(ctx, onClose); err != nil {
		return nil, err
	}
	for _, n := range []int{1, fillers} {
		log.Info("lab: loading", "policies", n, "identities", n)
		if err := b.fill(ctx, n); err != nil {
			return nil, err
		}
		p := labPhase{policies: n, identities: n}
		log.Info("lab: policy flips", "count", flips)
		for i := range flips {
			f, err := b.flip(ctx, fmt.Sprintf("measured-%d-%d", n, i))
			if err != nil {
				return nil, err
			}
			p.allow, p.deny, p.write = append(p.allow, f.allow), append(p.deny, f.deny), append(p.write, f.write)
			p.answered = append(p.answered, f.allow-f.write)
		}
		log.Info("lab: new pods", "count", newPods)
		if err := b.createPolicy(ctx, allowClients(fmt.Sprintf("clients-%d", n))); err != nil {
			return nil, err
		}
		if _, err := b.pairs(ctx, b.clients, time.Now(), true, labWait); err != nil {
			return nil, err
		}
		for range newPods {
			d, err := b.newPod(ctx)
			if err != nil {
				return nil, err
			}
			p.newPod = append(p.newPod, d)
		}
		if err := b.cilium.CiliumV2().CiliumNetworkPolicies(labNS).Delete(ctx, fmt.Sprintf("clients-%d", n), metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		for _, d := range [][]time.Duration{p.allow, p.deny, p.newPod, p.write, p.answered} {
			slices.Sort(d)
		}
		phases = append(phases, p)
	}
	return phases, nil
}

// deploy makes a server and a client pod on each node and starts the
// servers.
func (b *labBed) deploy(ctx context.Context, onClose func(func() error)) error {
	cs := b.Clientset
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: labNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i, n := range b.Plan.Nodes[:2] {
		for _, role := range []string{"server", "client"} {
			p := benchlab.Pod(fmt.Sprintf("%s-%d", role, i), n.Name, map[string]string{"role": role})
			if _, err := cs.CoreV1().Pods(labNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	ips, err := b.WaitPods(ctx, labNS, 4)
	if err != nil {
		return err
	}
	for i, n := range b.Plan.Nodes[:2] {
		ip := ips[fmt.Sprintf("server-%d", i)]
		ns, err := benchlab.PodNetns(n, ip)
		if err != nil {
			return err
		}
		s, err := traffic.StartServers(ns, ip, serverPort+1, serverPort)
		if err != nil {
			return err
		}
		onClose(s.Close)
		b.servers = append(b.servers, ip)
		if ns, err = benchlab.PodNetns(n, ips[fmt.Sprintf("client-%d", i)]); err != nil {
			return err
		}
		b.clients = append(b.clients, ns)
		m, err := benchlab.AgentMaps(n)
		if err != nil {
			return err
		}
		onClose(m.Close)
		b.maps = append(b.maps, m)
		cep, err := b.cilium.CiliumV2().CiliumEndpoints(labNS).Get(ctx, fmt.Sprintf("server-%d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.serverEPs = append(b.serverEPs, uint16(cep.Status.ID))
	}
	return nil
}

// fill adds filler identities and policies up to n of each, and waits
// until the last is in both servers' maps and the agents are idle.
func (b *labBed) fill(ctx context.Context, n int) error {
	for ; b.fillers < n; b.fillers++ {
		name := fmt.Sprintf("filler-%d", b.fillers)
		id := &v2.CiliumIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: identity.NumericIdentity(firstFiller + b.fillers).String()},
			SecurityLabels: map[string]string{
				"k8s:app":                         name,
				"k8s:io.kubernetes.pod.namespace": labNS,
			},
		}
		if _, err := b.cilium.CiliumV2().CiliumIdentities().Create(ctx, id, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("filler identity %s: %w", id.Name, err)
		}
		p := &v2.CiliumNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: labNS},
			Spec: &api.Rule{
				EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"role": "server"}},
				Ingress: []api.IngressRule{{
					IngressCommonRule: api.IngressCommonRule{FromEndpoints: []api.EndpointSelector{{MatchLabels: map[string]string{"app": name}}}},
					ToPorts:           []api.PortRule{{Ports: []api.PortProtocol{{Port: strconv.Itoa(fillerPort), Protocol: api.ProtoTCP}}}},
				}},
			},
		}
		if err := b.createPolicy(ctx, p); err != nil {
			return err
		}
	}
	last := identity.NumericIdentity(firstFiller + b.fillers - 1)
	deadline := time.Now().Add(5 * time.Minute)
	for i, m := range b.maps {
		for !m.PolicyHas(b.serverEPs[i], spec.Ingress, last, spec.ProtoTCP, fillerPort) {
			if time.Now().After(deadline) {
				return fmt.Errorf("filler identity %d is not in server-%d's map after 5m", last, i)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if err := b.awaitIdle(ctx); err != nil {
		return err
	}
	// With the servers isolated, no client reaches them.
	_, err := b.pairs(ctx, b.clients, time.Now(), false, labWait)
	return err
}

func (b *labBed) createPolicy(ctx context.Context, p *v2.CiliumNetworkPolicy) error {
	if _, err := b.cilium.CiliumV2().CiliumNetworkPolicies(labNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("policy %s: %w", p.Name, err)
	}
	return nil
}

// allowClients is the measured policy: clients reach the servers.
func allowClients(name string) *v2.CiliumNetworkPolicy {
	return &v2.CiliumNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: labNS},
		Spec: &api.Rule{
			EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"role": "server"}},
			Ingress: []api.IngressRule{{
				IngressCommonRule: api.IngressCommonRule{FromEndpoints: []api.EndpointSelector{{MatchLabels: map[string]string{"role": "client"}}}},
				ToPorts:           []api.PortRule{{Ports: []api.PortProtocol{{Port: strconv.Itoa(serverPort), Protocol: api.ProtoTCP}}}},
			}},
		},
	}
}

type flipDelays struct{ allow, deny, write time.Duration }

// flip creates the measured policy and deletes it, returning the delay
// of each and the create call's time.
func (b *labBed) flip(ctx context.Context, name string) (f flipDelays, err error) {
	start := time.Now()
	if err := b.createPolicy(ctx, allowClients(name)); err != nil {
		return f, err
	}
	f.write = time.Since(start)
	if f.allow, err = b.pairs(ctx, b.clients, start, true, labWait); err != nil {
		return f, err
	}
	start = time.Now()
	if err := b.cilium.CiliumV2().CiliumNetworkPolicies(labNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return f, err
	}
	f.deny, err = b.pairs(ctx, b.clients, start, false, labWait)
	return f, err
}

// pairs probes from each namespace of froms to every server until each
// pair is open (connects) or closed (deniedRun attempts in a row time
// out), and returns the slowest pair's delay from start: to the start of
// the first attempt that connected, or of the first of the run that did
// not. An attempt refused or failing otherwise is an error.
func (b *labBed) pairs(ctx context.Context, froms []string, start time.Time, open bool, within time.Duration) (time.Duration, error) {
	var (
		mu      sync.Mutex
		slowest time.Duration
		errs    []error
		wg      sync.WaitGroup
	)
	for _, from := range froms {
		for _, to := range b.servers {
			wg.Go(func() {
				d, err := probe(ctx, from, netip.AddrPortFrom(to, serverPort), start, open, within)
				mu.Lock()
				defer mu.Unlock()
				slowest = max(slowest, d)
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
	}
	wg.Wait()
	return slowest, errors.Join(errs...)
}

// probe is one pair's loop of attempts; see pairs.
func probe(ctx context.Context, from string, to netip.AddrPort, start time.Time, open bool, within time.Duration) (time.Duration, error) {
	var runStart time.Time
	run := 0
	for ctx.Err() == nil {
		at := time.Now()
		if at.Sub(start) > within {
			state := "open"
			if !open {
				state = "closed"
			}
			return 0, fmt.Errorf("%s from a client is not %s after %v", to, state, within)
		}
		c, err := dptest.DialTCP(from, to.Addr(), int(to.Port()), probeTimeout)
		if err == nil {
			c.Close()
			if open {
				return at.Sub(start), nil
			}
			run = 0
			// Connections that succeed take microseconds: a pause keeps
			// the probes' load off the cluster they measure.
			time.Sleep(probePause)
			continue
		}
		var nerr net.Error
		if !errors.As(err, &nerr) || !nerr.Timeout() {
			return 0, fmt.Errorf("%s from a client: %w", to, err)
		}
		if open {
			continue
		}
		if run == 0 {
			runStart = at
		}
		if run++; run == deniedRun {
			return runStart.Sub(start), nil
		}
	}
	return 0, ctx.Err()
}

// newPod starts a client pod with labels no pod had, on each node in
// turn, and returns the delay from the moment its container runs (the
// earliest it can send: the lab's kubelet, as any, starts containers once
// CNI ADD returned) to its first connection to every server.
func (b *labBed) newPod(ctx context.Context) (time.Duration, error) {
	k := b.newPods
	b.newPods++
	node := b.Plan.Nodes[k%2]
	known, err := containerPIDs(node)
	if err != nil {
		return 0, err
	}
	name := fmt.Sprintf("new-%d", k)
	p := benchlab.Pod(name, node.Name, map[string]string{"role": "client", "seq": strconv.Itoa(k)})
	if _, err := b.Clientset.CoreV1().Pods(labNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	defer func() {
		zero := int64(0)
		err := b.Clientset.CoreV1().Pods(labNS).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !k8serrors.IsNotFound(err) {
			b.log.Warn("deleting a new pod", "pod", name, "error", err)
		}
	}()
	ns, err := awaitRouted(ctx, node, known, netip.AddrPortFrom(b.servers[0], serverPort))
	if err != nil {
		return 0, fmt.Errorf("pod %s: %w%s", name, err, b.podEvents(ctx, name))
	}
	return b.pairs(ctx, []string{ns}, time.Now(), true, labWait)
}

// podEvents says what the cluster reported about a pod, for an error.
func (b *labBed) podEvents(ctx context.Context, name string) string {
	evs, err := b.Clientset.CoreV1().Events(labNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, ev := range evs.Items {
		fmt.Fprintf(&sb, "\n  %s %s: %s", ev.Type, ev.Reason, ev.Message)
	}
	return sb.String()
}

// containerPIDs are the node's container processes (the lab runs the
// pods' images as agnhost). Not their namespaces: the kernel reuses the
// number of a namespace that went.
func containerPIDs(n benchlab.Node) (map[int]bool, error) {
	procs, err := benchlab.NodeProcs(n)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, pid := range procs["agnhost"] {
		out[pid] = true
	}
	return out, nil
}

// awaitRouted polls the node's container processes not in known for a
// network namespace with a route to dst, and returns it.
func awaitRouted(ctx context.Context, n benchlab.Node, known map[int]bool, dst netip.AddrPort) (string, error) {
	deadline := time.Now().Add(labWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		procs, err := benchlab.NodeProcs(n)
		if err != nil {
			return "", err
		}
		for _, pid := range procs["agnhost"] {
			if ns := fmt.Sprintf("/proc/%d/ns/net", pid); !known[pid] && routed(ns, dst) {
				return ns, nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return "", fmt.Errorf("no new container on %s with a route to %s after %v", n.Name, dst, labWait)
}

// routed reports whether ns has an address and a route to dst: a UDP
// socket connects (which sends nothing).
func routed(ns string, dst netip.AddrPort) bool {
	return netnamespace.Do(ns, func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		if err == nil {
			c.Close()
		}
		return err
	}) == nil
}

// awaitIdle waits until every agent of the lab used under 5% of a CPU in
// each of two seconds in a row: the load's work is done.
func (b *labBed) awaitIdle(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Minute)
	quiet := 0
	last, err := b.agentsCPU()
	if err != nil {
		return err
	}
	for quiet < 2 {
		if time.Now().After(deadline) {
			return errors.New("the agents are not idle after 5m")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		now, err := b.agentsCPU()
		if err != nil {
			return err
		}
		if now-last < 50*time.Millisecond*time.Duration(len(b.Plan.Nodes)) {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	return nil
}

// agentsCPU is the CPU time the lab's agents used so far.
func (b *labBed) agentsCPU() (time.Duration, error) {
	var sum time.Duration
	for _, n := range b.Plan.Nodes {
		procs, err := benchlab.NodeProcs(n)
		if err != nil {
			return 0, err
		}
		for _, pid := range procs["cilium-agent"] {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				return 0, err
			}
			// The fields after the command's closing parenthesis; utime
			// and stime are the 14th and 15th of the line, in ticks (USER_HZ, 100).
			f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
			for _, v := range f[11:13] {
				t, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, err
				}
				sum += time.Duration(t) * 10 * time.Millisecond
			}
		}
	}
	return sum, nil
}
