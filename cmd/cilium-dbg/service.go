package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
)

func newServiceCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "service", Short: "The Services the agent balances (the kube-proxy replacement)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the frontends with their backends, affinity and traffic policies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			svcs, err := o.client().Services(ctx)
			if err != nil {
				return err
			}
			out, err := ciliumapi.Services(svcs)
			if err != nil {
				return err
			}
			return o.render(out, func(w *tabwriter.Writer) {
				row(w, "FRONTEND", "TYPE", "SERVICE", "BACKENDS", "AFFINITY", "TRAFFIC POLICY", "STATUS")
				for _, s := range svcs {
					backends := serviceBackends(s.Backends)
					if s.InternalBackends != nil {
						backends = "external: " + backends + "; internal: " + serviceBackends(s.InternalBackends)
					}
					affinity := "-"
					if s.SessionAffinityTimeout > 0 {
						affinity = fmt.Sprintf("ClientIP %ds", s.SessionAffinityTimeout)
					}
					name := s.Service
					if s.Port != "" {
						name += ":" + s.Port
					}
					row(w, s.Frontend, s.Type, name, backends, affinity,
						"ext="+s.ExternalTrafficPolicy+" int="+s.InternalTrafficPolicy, s.Status)
				}
			})
		},
	})
	return cmd
}

func serviceBackends(bs []models.ServiceBackend) string {
	if len(bs) == 0 {
		return "(none)"
	}
	var out []string
	for _, b := range bs {
		s := b.Address
		if b.State != "active" {
			s += " (" + b.State + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// bpfLBEntry is one frontend of the service maps with its slots resolved.
type bpfLBEntry struct {
	Frontend        string   `json:"frontend"`
	Scope           string   `json:"scope"`
	Flags           []string `json:"flags"`
	AffinityTimeout uint32   `json:"affinityTimeout,omitempty"`
	RevNAT          uint16   `json:"revNAT"`
	RevNATAddress   string   `json:"revNATAddress"`
	Backends        []string `json:"backends"`
}

func (o *options) bpfLB(m *datapath.Maps) error {
	svcs, err := m.Services()
	if err != nil {
		return err
	}
	backends, err := m.Backends()
	if err != nil {
		return err
	}
	revs, err := m.RevNATs()
	if err != nil {
		return err
	}
	out := make([]bpfLBEntry, 0, len(svcs))
	for _, s := range svcs {
		e := bpfLBEntry{Frontend: s.Frontend.String(), Scope: "external", Flags: s.Flags.Names(),
			RevNAT: s.RevNATIndex, Backends: []string{}}
		if s.Frontend.Scope == spec.ScopeInternal {
			e.Scope = "internal"
		}
		if s.Flags&spec.LBAffinity != 0 {
			e.AffinityTimeout = s.AffinityTimeout
		}
		if r, ok := revs[s.RevNATIndex]; ok {
			e.RevNATAddress = netip.AddrPortFrom(r.Address, r.Port).String()
		}
		for i, id := range s.Backends {
			b, ok := backends[id]
			if !ok {
				e.Backends = append(e.Backends, fmt.Sprintf("slot %d: backend %d missing", i+1, id))
				continue
			}
			a := netip.AddrPortFrom(b.Address, b.Port).String()
			if b.Terminating {
				a += " (terminating)"
			}
			e.Backends = append(e.Backends, a)
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b bpfLBEntry) int { return cmp.Compare(a.Scope, b.Scope) })
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "FRONTEND", "SCOPE", "FLAGS", "REVNAT", "BACKENDS")
		for _, e := range out {
			flags := strings.Join(e.Flags, ",")
			if e.AffinityTimeout > 0 {
				flags += fmt.Sprintf(" affinity=%ds", e.AffinityTimeout)
			}
			backends := strings.Join(e.Backends, ", ")
			if backends == "" {
				backends = "(none: rejected)"
			}
			row(w, e.Frontend, e.Scope, orDash(strings.TrimSpace(flags)), fmt.Sprintf("%d (%s)", e.RevNAT, orDash(e.RevNATAddress)), backends)
		}
	})
}
