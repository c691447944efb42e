package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	cm "github.com/cilium/cilium/api/v1/models"
	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
)

// apiTimeout bounds every API call: a hung agent must not hang the tool.
const apiTimeout = 30 * time.Second

func apiContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), apiTimeout)
}

// statusView is `cilium-dbg status`.
type statusView struct {
	Socket string `json:"socket"`
	// OK is false when a module is degraded.
	OK          bool                  `json:"ok"`
	Kubernetes  string                `json:"kubernetes"`
	RoutingMode string                `json:"routingMode"`
	Masquerade  string                `json:"masquerade"`
	Endpoints   int                   `json:"endpoints"`
	Identities  int                   `json:"identities"`
	Modules     []models.ModuleHealth `json:"modules"`
}

func newStatusCommand(o *options) *cobra.Command {
	var brief bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Kubernetes, datapath mode, endpoints, identities and the health of every module",
		Long: `Kubernetes, datapath mode, endpoints, identities and the health of every module.

-o json prints Cilium's StatusResponse model, as cilium-cli reads it.
--brief prints one line, OK or the first unhealthy part, and fails unless OK.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			st, in, err := o.status(ctx)
			if err != nil {
				if brief {
					return errors.New("cilium: daemon unreachable")
				}
				return err
			}
			cst := ciliumapi.Status(in)
			if brief && !o.structured() {
				return briefLine(o.out, cst)
			}
			return o.render(cst, func(w *tabwriter.Writer) { st.table(w) })
		},
	}
	cmd.Flags().BoolVar(&brief, "brief", false, "print one line: OK, or the first unhealthy part (exit code 1)")
	// Cilium's --verbose adds detail to the table; ours always has it all.
	cmd.Flags().Bool("verbose", false, "print everything (the table always does)")
	return cmd
}

// briefLine prints Cilium's one-line status and fails when it is not OK.
func briefLine(w io.Writer, st *cm.StatusResponse) error {
	line, ok := ciliumapi.Brief(st)
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	if !ok {
		return errUnhealthy
	}
	return nil
}

// errUnhealthy fails status --brief after its line says why.
var errUnhealthy = errors.New("agent unhealthy")

func (o *options) status(ctx context.Context) (statusView, ciliumapi.StatusInput, error) {
	c := o.client()
	h, err := c.Healthz(ctx)
	// A degraded agent answers 503 with its health: that is a status too.
	if err != nil && !isStatus(err, http.StatusServiceUnavailable) {
		return statusView{}, ciliumapi.StatusInput{}, err
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		return statusView{}, ciliumapi.StatusInput{}, err
	}
	eps, err := c.Endpoints(ctx)
	if err != nil {
		return statusView{}, ciliumapi.StatusInput{}, err
	}
	ids, err := c.Identities(ctx)
	if err != nil {
		return statusView{}, ciliumapi.StatusInput{}, err
	}
	allocs, err := c.Allocations(ctx)
	if err != nil {
		return statusView{}, ciliumapi.StatusInput{}, err
	}
	return statusView{Socket: o.socket, OK: h.OK, Kubernetes: kubernetesStatus(cfg, h),
			RoutingMode: orDash(cfg.Flags["routing-mode"]), Masquerade: orDash(cfg.Flags["enable-ipv4-masquerade"]),
			Endpoints: len(eps), Identities: len(ids), Modules: h.Modules},
		ciliumapi.StatusInput{Health: h, Config: cfg, Allocations: allocs}, nil
}

// kubernetesStatus is what Cilium's status model says of Kubernetes, as
// the table shows it.
func kubernetesStatus(cfg models.Config, h models.Health) string {
	k := ciliumapi.Status(ciliumapi.StatusInput{Health: h, Config: cfg}).Kubernetes
	switch k.State {
	case cm.K8sStatusStateDisabled:
		return "Disabled"
	case cm.K8sStatusStateOk:
		if k.Msg == "" || k.Msg == "OK" {
			return "OK"
		}
		return "OK: " + k.Msg
	}
	return "Degraded: " + k.Msg
}

func (s statusView) table(w *tabwriter.Writer) {
	health := "OK"
	if !s.OK {
		health = "Degraded"
	}
	row(w, "Agent:", s.Socket)
	row(w, "Health:", health)
	row(w, "Kubernetes:", s.Kubernetes)
	row(w, "Datapath:", fmt.Sprintf("routing %s, masquerade %s", s.RoutingMode, s.Masquerade))
	row(w, "Endpoints:", s.Endpoints)
	row(w, "Identities:", s.Identities)
	row(w, "Modules:")
	for _, m := range s.Modules {
		detail := m.Message
		if m.Error != "" && detail != "" {
			detail += ": " + m.Error
		} else if m.Error != "" {
			detail = m.Error
		}
		row(w, "  "+m.Module, m.Level, orDash(detail), since(m.Since))
	}
}

// since is how long ago t was, to the second; "-" for the zero time.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Truncate(time.Second).String() + " ago"
}
