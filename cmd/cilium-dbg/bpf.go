package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

func newBPFCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "bpf", Short: "The datapath's pinned maps under --bpf-root, read directly"}
	groups := map[string]*cobra.Command{}
	for _, sub := range []struct {
		name, short string
		run         func(*datapath.Maps) error
	}{
		{"ipcache", "List the ipcache: prefix to identity and tunnel endpoint", o.bpfIPCache},
		{"endpoint", "List the local endpoints the datapath serves", o.bpfEndpoints},
		{"ct", "List the connection tracking table", o.bpfConntrack},
		{"metrics", "List the datapath's packet counters by reason and direction", o.bpfMetrics},
		{"lb", "List the service maps: frontends, their backends by slot and reverse translation", o.bpfLB},
		{"l2-responder", "List the addresses this node answers ARP for (L2 announcements), by device", o.bpfL2Responder},
	} {
		group := &cobra.Command{Use: sub.name, Short: sub.short}
		groups[sub.name] = group
		group.AddCommand(&cobra.Command{
			Use:   "list",
			Short: sub.short,
			Args:  cobra.NoArgs,
			RunE:  func(*cobra.Command, []string) error { return o.withMaps(sub.run) },
		})
		cmd.AddCommand(group)
	}
	groups["ipcache"].AddCommand(newIPCacheGetCommand(o), newIPCacheMatchCommand(o), newIPCacheDeleteCommand(o),
		newIPCacheUpdateCommand(o))
	groups["ct"].AddCommand(newCTFlushCommand(o))
	maglev := &cobra.Command{Use: "maglev", Short: "The frontends' Maglev tables (--bpf-lb-algorithm=maglev)"}
	maglev.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the Maglev tables by service id (reverse NAT index): how many slots each backend has",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return o.withMaps(o.bpfMaglev) },
	}, &cobra.Command{
		Use:   "get <service-id>",
		Short: "Print one Maglev table: the backend id of every slot",
		Args:  cobra.ExactArgs(1),
		RunE:  o.withID("service id", o.bpfMaglevGet),
	})
	groups["lb"].AddCommand(maglev)
	policy := &cobra.Command{Use: "policy", Short: "An endpoint's policy map entries"}
	policy.AddCommand(&cobra.Command{
		Use:     "list <endpoint-id>",
		Aliases: []string{"get"},
		Short:   "List the policy entries of one endpoint",
		Args:    cobra.ExactArgs(1),
		RunE:    o.withID("endpoint id", o.bpfPolicy),
	})
	cmd.AddCommand(policy)
	return cmd
}

// withID runs fn on the maps with the command's one argument, a 16-bit id
// (what names it), not 0.
func (o *options) withID(what string, fn func(*datapath.Maps, uint16) error) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		id, err := strconv.ParseUint(args[0], 10, 16)
		if err != nil || id == 0 {
			return fmt.Errorf("%s %q: want a number from 1 to 65535", what, args[0])
		}
		return o.withMaps(func(m *datapath.Maps) error { return fn(m, uint16(id)) })
	}
}

func (o *options) bpfIPCache(m *datapath.Maps) error {
	entries, err := m.IPCacheEntries()
	if err != nil {
		return err
	}
	out := models.IPCacheEntries(entries)
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "PREFIX", "IDENTITY", "TUNNEL ENDPOINT", "CIDR IDENTITY")
		for _, e := range out {
			cidr := "-"
			if e.CIDRIdentity != 0 {
				cidr = e.CIDRIdentity.String()
			}
			row(w, e.Prefix, e.Identity, orDash(e.TunnelEndpoint), cidr)
		}
	})
}

// bpfEndpoint is one entry of the endpoint map.
type bpfEndpoint struct {
	ID            uint16                   `json:"id"`
	IPv4          string                   `json:"ipv4"`
	Identity      identity.NumericIdentity `json:"identity"`
	MAC           string                   `json:"mac"`
	HostMAC       string                   `json:"hostMAC"`
	HostIfindex   int                      `json:"hostIfindex"`
	PolicyIngress bool                     `json:"policyIngress"`
	PolicyEgress  bool                     `json:"policyEgress"`
}

func (o *options) bpfEndpoints(m *datapath.Maps) error {
	entries, err := m.EndpointEntries()
	if err != nil {
		return err
	}
	out := make([]bpfEndpoint, 0, len(entries))
	for _, e := range entries {
		out = append(out, bpfEndpoint{ID: e.ID, IPv4: e.IPv4.String(), Identity: e.Identity, MAC: e.MAC.String(),
			HostMAC: e.HostMAC.String(), HostIfindex: e.HostIfindex, PolicyIngress: e.PolicyIngress, PolicyEgress: e.PolicyEgress})
	}
	slices.SortFunc(out, func(a, b bpfEndpoint) int { return cmp.Compare(a.ID, b.ID) })
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "ID", "IPV4", "IDENTITY", "MAC", "HOST MAC", "HOST IFINDEX", "POLICY")
		for _, e := range out {
			row(w, e.ID, e.IPv4, e.Identity, e.MAC, e.HostMAC, e.HostIfindex, enforcement(e.PolicyIngress, e.PolicyEgress))
		}
	})
}

func enforcement(ingress, egress bool) string {
	switch {
	case ingress && egress:
		return "ingress,egress"
	case ingress:
		return "ingress"
	case egress:
		return "egress"
	}
	return "-"
}

// bpfPolicyEntry is one key of an endpoint's policy map.
type bpfPolicyEntry struct {
	Direction string                   `json:"direction"`
	Identity  identity.NumericIdentity `json:"identity"`
	// Protocol 0 is any; Port 0 any port; EndPort is set for a range.
	Protocol  uint8  `json:"protocol"`
	Port      uint16 `json:"port"`
	EndPort   uint16 `json:"endPort,omitempty"`
	Verdict   string `json:"verdict"`
	ProxyPort uint16 `json:"proxyPort,omitempty"`
}

func (o *options) bpfPolicy(m *datapath.Maps, epID uint16) error {
	entries, err := m.PolicyEntries(epID)
	if err != nil {
		return err
	}
	out := make([]bpfPolicyEntry, 0, len(entries))
	for _, e := range entries {
		v := bpfPolicyEntry{Direction: e.Direction.String(), Identity: e.Identity, Protocol: e.Protocol,
			Port: e.Port, EndPort: e.EndPort, Verdict: "allow", ProxyPort: e.ProxyPort}
		if e.Deny {
			v.Verdict = "deny"
		}
		out = append(out, v)
	}
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "DIRECTION", "IDENTITY", "PROTOCOL", "PORT", "VERDICT", "PROXY PORT")
		for _, e := range out {
			proxy := "-"
			if e.ProxyPort != 0 {
				proxy = strconv.Itoa(int(e.ProxyPort))
			}
			row(w, e.Direction, identityOrAny(e.Identity), spec.ProtoString(e.Protocol), portRange(e.Port, e.EndPort), e.Verdict, proxy)
		}
	})
}

// identityOrAny shows identity 0 of policy entries, which matches any.
func identityOrAny(id identity.NumericIdentity) string {
	if id == identity.Unknown {
		return "any"
	}
	return id.String()
}

// portRange shows a policy entry's port or range; 0 is any port.
func portRange(port, endPort uint16) string {
	switch {
	case endPort != 0:
		return fmt.Sprintf("%d-%d", port, endPort)
	case port != 0:
		return strconv.Itoa(int(port))
	}
	return "any"
}

// bpfCounter is one entry of the metrics map, summed over CPUs.
type bpfCounter struct {
	Reason     string `json:"reason"`
	ReasonCode uint8  `json:"reasonCode"`
	Direction  string `json:"direction"`
	Packets    uint64 `json:"packets"`
	Bytes      uint64 `json:"bytes"`
}

// bpfL2Entry is one entry of the L2 responder map.
type bpfL2Entry struct {
	IP        string `json:"ip"`
	Ifindex   uint32 `json:"ifindex"`
	MAC       string `json:"mac"`
	Responses uint64 `json:"responses"`
}

func (o *options) bpfL2Responder(m *datapath.Maps) error {
	es, err := m.L2Responders()
	if err != nil {
		return err
	}
	out := make([]bpfL2Entry, 0, len(es))
	for _, e := range es {
		out = append(out, bpfL2Entry{IP: e.Address.String(), Ifindex: e.Ifindex, MAC: e.MAC.String(), Responses: e.Responses})
	}
	slices.SortFunc(out, func(a, b bpfL2Entry) int { return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Ifindex, b.Ifindex)) })
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "IP", "IFINDEX", "MAC", "RESPONSES")
		for _, e := range out {
			row(w, e.IP, e.Ifindex, e.MAC, e.Responses)
		}
	})
}

func (o *options) bpfMetrics(m *datapath.Maps) error {
	cs, err := m.Counters()
	if err != nil {
		return err
	}
	slices.SortFunc(cs, func(a, b datapath.Counter) int {
		return cmp.Or(cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Direction, b.Direction))
	})
	out := make([]bpfCounter, 0, len(cs))
	for _, c := range cs {
		out = append(out, bpfCounter{Reason: c.Reason.String(), ReasonCode: uint8(c.Reason),
			Direction: c.Direction.String(), Packets: c.Packets, Bytes: c.Bytes})
	}
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "REASON", "DIRECTION", "PACKETS", "BYTES")
		for _, c := range out {
			row(w, c.Reason, c.Direction, c.Packets, c.Bytes)
		}
	})
}
