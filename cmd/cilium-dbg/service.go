package main

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
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

// bpfLB lists the service maps as Cilium's bpf lb list does: each slot of
// a frontend, "address:port/PROTO (slot)", to what it holds; slot 0, the
// frontend's own, holds its reverse NAT index and flags, the others the
// backend of that slot. -o json prints the same map.
func (o *options) bpfLB(m *datapath.Maps) error {
	svcs, err := m.Services()
	if err != nil {
		return err
	}
	backends, err := m.Backends()
	if err != nil {
		return err
	}
	out := map[string][]string{}
	for _, s := range svcs {
		fe := s.Frontend.String()
		out[fmt.Sprintf("%s (0)", fe)] = []string{fmt.Sprintf("0.0.0.0:0 (%d) (0) [%s]", s.RevNATIndex, lbFlags(s))}
		for i, id := range s.Backends {
			slot := i + 1
			b, ok := backends[id]
			if !ok {
				out[fmt.Sprintf("%s (%d)", fe, slot)] = []string{fmt.Sprintf("backend %d not found", id)}
				continue
			}
			e := fmt.Sprintf("%s/%s (%d) (%d)", netip.AddrPortFrom(b.Address, b.Port), spec.ProtocolName(b.Protocol), s.RevNATIndex, slot)
			if b.Terminating {
				e += " [terminating]"
			}
			out[fmt.Sprintf("%s (%d)", fe, slot)] = []string{e}
		}
	}
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "SERVICE ADDRESS", "BACKEND ADDRESS (REVNAT_ID) (SLOT)")
		keys := slices.Collect(maps.Keys(out))
		slices.SortFunc(keys, compareSlotKeys)
		for _, k := range keys {
			for i, v := range out[k] {
				if i > 0 {
					k = ""
				}
				row(w, k, v)
			}
		}
	})
}

// compareSlotKeys orders "frontend (slot)" keys by frontend, then slot
// as a number.
func compareSlotKeys(a, b string) int {
	fa, sa, _ := strings.Cut(a, " (")
	fb, sb, _ := strings.Cut(b, " (")
	na, _ := strconv.Atoi(strings.TrimSuffix(sa, ")"))
	nb, _ := strconv.Atoi(strings.TrimSuffix(sb, ")"))
	return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(na, nb))
}

// lbFlags names a frontend's type and options as Cilium's service flags
// do: its type first (ClusterIP unless another), then the options.
func lbFlags(s spec.Service) string {
	out := []string{"ClusterIP"}
	for _, n := range []struct {
		bit  spec.LBFlags
		name string
	}{{spec.LBNodePort, "NodePort"}, {spec.LBExternalIP, "ExternalIPs"}, {spec.LBHostPort, "HostPort"},
		{spec.LBLoadBalancer, "LoadBalancer"}} {
		if s.Flags&n.bit != 0 {
			out[0] = n.name
		}
	}
	if s.Flags&spec.LBAffinity != 0 {
		out = append(out, fmt.Sprintf("sessionAffinity (%ds)", s.AffinityTimeout))
	}
	if s.Flags&spec.LBLocal != 0 {
		out = append(out, "Local")
	}
	if s.Flags&spec.LBTwoScopes != 0 {
		out = append(out, "two-scopes")
	}
	if s.Flags&spec.LBSourceRange != 0 {
		out = append(out, "check source-range")
	}
	if s.Flags&spec.LBMaglev != 0 {
		out = append(out, "maglev")
	}
	if s.Frontend.Scope == spec.ScopeInternal {
		out = append(out, "internal")
	}
	return strings.Join(out, ", ")
}

// bpfMaglev lists the Maglev tables, by reverse NAT index (Cilium's
// service id): each table's slots and, for each backend id, how many of
// them it has. One table whole is `maglev get`.
func (o *options) bpfMaglev(m *datapath.Maps) error {
	idxs, err := m.MaglevIndexes()
	if err != nil {
		return err
	}
	out := map[uint16]map[spec.BackendID]int{}
	for _, idx := range idxs {
		table, ok, err := m.MaglevTable(idx)
		if err != nil {
			return err
		}
		if !ok {
			continue // gone since listed
		}
		count := map[spec.BackendID]int{}
		for _, id := range table {
			count[id]++
		}
		out[idx] = count
	}
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "SVC ID", "SLOTS", "BACKEND ID (SLOTS)")
		for _, idx := range slices.Sorted(maps.Keys(out)) {
			var parts []string
			total := 0
			for _, id := range slices.Sorted(maps.Keys(out[idx])) {
				parts = append(parts, fmt.Sprintf("%d (%d)", id, out[idx][id]))
				total += out[idx][id]
			}
			row(w, idx, total, strings.Join(parts, " "))
		}
	})
}

// bpfMaglevGet prints one Maglev table whole: the backend id of each
// slot, in slot order.
func (o *options) bpfMaglevGet(m *datapath.Maps, idx uint16) error {
	table, ok, err := m.MaglevTable(idx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("service id %d has no Maglev table", idx)
	}
	return o.render(table, func(w *tabwriter.Writer) {
		row(w, "SVC ID", "LUT")
		ids := make([]string, len(table))
		for i, id := range table {
			ids[i] = strconv.FormatUint(uint64(id), 10)
		}
		row(w, idx, "["+strings.Join(ids, " ")+"]")
	})
}
