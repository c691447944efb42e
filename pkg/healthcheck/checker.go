// Package healthcheck is Cilium's health checking in the agent: a health
// endpoint per node (an endpoint with the reserved health identity in a
// namespace of its own, its address from the node's pod CIDR and
// published in the node's CiliumNode), responders on the node and in the
// endpoint, a prober that reaches every node and health endpoint over
// ICMP and HTTP, periodically and on demand, and Cilium's health API on
// a unix socket (health.sock) that cilium-health reads.
package healthcheck

import (
	"context"
	"slices"
	"sync"
	"time"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"

	"github.com/cilium-go/cilium/pkg/healthcheck/probe"
	"github.com/cilium-go/cilium/pkg/node"
)

// DefaultInterval is Cilium's probe interval for a small cluster.
const DefaultInterval = time.Minute

// Checker probes the cluster's nodes and keeps the last result.
type Checker struct {
	prober   *probe.Prober
	self     string
	interval time.Duration
	// nodes lists the nodes to probe; the local node comes first.
	nodes func() []node.Node
	// endpoints says whether health endpoints are probed.
	endpoints bool

	// probeMu makes probes one at a time: an on-demand probe during a
	// periodic one waits for it and then probes again.
	probeMu sync.Mutex
	mu      sync.Mutex
	last    *healthmodels.HealthStatusResponse
}

// NewChecker probes what nodes lists with prober; self names this node.
func NewChecker(prober *probe.Prober, self string, interval time.Duration, endpoints bool, nodes func() []node.Node) *Checker {
	return &Checker{prober: prober, self: self, interval: interval, endpoints: endpoints, nodes: nodes}
}

// Targets are the nodes to probe. A health address outside the node's pod
// CIDR is not probed: whoever can write a CiliumNode would otherwise
// point this node's probes at any address of their choice.
func Targets(nodes []node.Node, endpoints bool) []probe.Target {
	out := make([]probe.Target, 0, len(nodes))
	for _, n := range nodes {
		t := probe.Target{Name: n.Name, NodeIP: n.IPv4}
		if endpoints && n.HealthIPv4.Is4() && n.PodCIDR.IsValid() && n.PodCIDR.Contains(n.HealthIPv4) {
			t.HealthIP = n.HealthIPv4
		}
		out = append(out, t)
	}
	return out
}

// Probe probes every node now and keeps the result.
func (c *Checker) Probe(ctx context.Context) *healthmodels.HealthStatusResponse {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	start := time.Now()
	nodes := slices.Clone(c.nodes())
	statuses := c.prober.Probe(ctx, Targets(nodes, c.endpoints))
	res := &healthmodels.HealthStatusResponse{
		Local:         &healthmodels.SelfStatus{Name: c.self},
		Nodes:         statuses,
		ProbeInterval: c.interval.String(),
		Timestamp:     start.UTC().Format(time.RFC3339),
	}
	c.mu.Lock()
	c.last = res
	c.mu.Unlock()
	return res
}

// Status is the last probe's result; before the first, the nodes known
// without any result.
func (c *Checker) Status() *healthmodels.HealthStatusResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil {
		return c.last
	}
	res := &healthmodels.HealthStatusResponse{Local: &healthmodels.SelfStatus{Name: c.self},
		ProbeInterval: c.interval.String(), Nodes: []*healthmodels.NodeStatus{}}
	for _, t := range Targets(c.nodes(), c.endpoints) {
		res.Nodes = append(res.Nodes, &healthmodels.NodeStatus{Name: t.Name,
			Host: &healthmodels.HostStatus{PrimaryAddress: &healthmodels.PathStatus{IP: t.NodeIP.String()}}})
	}
	return res
}

// Run probes every interval until ctx ends.
func (c *Checker) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// withSelf puts this node first: self, with what nodes adds about it.
func withSelf(nodes []node.Node, self node.Node) []node.Node {
	out := []node.Node{self}
	for _, n := range nodes {
		if n.Name == self.Name || n.Self {
			// The agent knows its own health address before its
			// CiliumNode says it.
			if !out[0].IPv4.IsValid() {
				out[0].IPv4 = n.IPv4
			}
			if !out[0].PodCIDR.IsValid() {
				out[0].PodCIDR = n.PodCIDR
			}
			continue
		}
		out = append(out, n)
	}
	return out
}
