package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
	"github.com/spf13/cobra"
)

func newStatusCommand(o *options) *cobra.Command {
	var probe, verbose bool
	c := &cobra.Command{
		Use:     "status",
		Aliases: []string{"connectivity"},
		Short:   "Display cilium connectivity to other nodes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			get := o.client().Status
			if probe {
				get = o.client().Probe
			}
			sr, err := get(cmd.Context())
			if err != nil {
				return err
			}
			if o.output == "json" {
				return o.printJSON(sr)
			}
			w := tabwriter.NewWriter(o.out, 2, 0, 3, ' ', 0)
			formatStatus(w, sr, verbose)
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&probe, "probe", false, "Synchronously probe connectivity status")
	c.Flags().BoolVar(&verbose, "verbose", false, "Print more information in results")
	o.addOutput(c)
	return c
}

// A path's state as Cilium's clients read it: no status yet is unknown,
// an empty status message is reachable, any other is unreachable.
type reach int

const (
	reachable reach = iota
	unknown
	unreachable
)

func statusOf(cs *healthmodels.ConnectivityStatus) reach {
	switch {
	case cs == nil:
		return unknown
	case cs.Status == "":
		return reachable
	}
	return unreachable
}

func pathOf(ps *healthmodels.PathStatus) reach {
	if ps == nil {
		return unreachable
	}
	return max(statusOf(ps.Icmp), statusOf(ps.HTTP))
}

func hostPaths(n *healthmodels.NodeStatus) []*healthmodels.PathStatus {
	if n.Host == nil {
		return nil
	}
	return append([]*healthmodels.PathStatus{n.Host.PrimaryAddress}, n.Host.SecondaryAddresses...)
}

func endpointPaths(n *healthmodels.NodeStatus) []*healthmodels.PathStatus {
	if n.HealthEndpoint == nil {
		return nil
	}
	return append([]*healthmodels.PathStatus{n.HealthEndpoint.PrimaryAddress}, n.HealthEndpoint.SecondaryAddresses...)
}

// healthy: no path is known unreachable.
func healthy(n *healthmodels.NodeStatus) bool {
	for _, p := range append(hostPaths(n), endpointPaths(n)...) {
		if pathOf(p) == unreachable {
			return false
		}
	}
	return true
}

// count is "reachable/total", with the unknown ones said.
func count(paths []*healthmodels.PathStatus) string {
	var ok, unk int
	for _, p := range paths {
		switch pathOf(p) {
		case reachable:
			ok++
		case unknown:
			unk++
		}
	}
	s := fmt.Sprintf("%d/%d", ok, len(paths))
	if unk > 0 {
		s += fmt.Sprintf(" (%d unknown)", unk)
	}
	return s
}

// formatStatus prints the layout of Cilium's cilium-health status: the
// summary line, a header, then this node and the others by name, one line
// each, or each path's probes with verbose.
func formatStatus(w io.Writer, sr *healthmodels.HealthStatusResponse, verbose bool) {
	self := ""
	if sr.Local != nil {
		self = sr.Local.Name
	}
	nodes := slices.Clone(sr.Nodes)
	slices.SortFunc(nodes, func(a, b *healthmodels.NodeStatus) int {
		// This node first, then by name.
		return cmp.Or(cmp.Compare(b2i(b.Name == self), b2i(a.Name == self)), cmp.Compare(a.Name, b.Name))
	})
	ok := 0
	for _, node := range nodes {
		if healthy(node) {
			ok++
		}
	}
	fmt.Fprintf(w, "Cluster health:\t%d/%d reachable\t(%s)\t(Probe interval: %s)\n", ok, len(nodes), sr.Timestamp, sr.ProbeInterval)
	fmt.Fprintf(w, "Name\tIP\tNode\tEndpoints\n")
	for _, node := range nodes {
		name := node.Name
		if name == self {
			name += " (localhost)"
		}
		if !verbose {
			ip := "unavailable"
			if node.Host != nil && node.Host.PrimaryAddress != nil {
				ip = node.Host.PrimaryAddress.IP
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", name, ip, count(hostPaths(node)), count(endpointPaths(node)))
			continue
		}
		fmt.Fprintf(w, "  %s:\n", name)
		for _, p := range hostPaths(node) {
			formatPath(w, "Host", p)
		}
		for _, p := range endpointPaths(node) {
			formatPath(w, "Endpoint", p)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func formatPath(w io.Writer, what string, p *healthmodels.PathStatus) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "    %s connectivity to %s:\n", what, p.IP)
	for _, c := range []struct {
		name string
		cs   *healthmodels.ConnectivityStatus
	}{{"ICMP to stack", p.Icmp}, {"HTTP to agent", p.HTTP}} {
		if c.cs == nil {
			continue
		}
		s := c.cs.Status
		if statusOf(c.cs) == reachable {
			s = "OK, RTT=" + time.Duration(c.cs.Latency).String()
		}
		fmt.Fprintf(w, "      %s:\t%s\t(Last probed: %s)\n", c.name, strings.TrimSpace(s), c.cs.LastProbed)
	}
}
