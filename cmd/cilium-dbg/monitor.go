package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/monitor"
)

// eventSource is the datapath's event reader; tests feed their own.
type eventSource interface {
	Read() (spec.Event, error)
	SetDeadline(time.Time)
	Close() error
}

type monitorOptions struct {
	types []string
	count int
}

func newMonitorCommand(o *options) *cobra.Command {
	mo := &monitorOptions{}
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Print datapath events (drops, traces, policy verdicts) as they happen",
		Long: "Asks the agent, which alone reads the node's events ring buffer and hands every\n" +
			"event to each reader (GET /v1/monitor). While no agent answers on --socket-path,\n" +
			"reads the ring buffer pinned under --bpf-root itself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, t := range mo.types {
				if !slices.Contains(models.MonitorEventTypes, t) {
					return fmt.Errorf("--type %q: want drop, trace or policy-verdict", t)
				}
			}
			err := o.monitorAgent(cmd.Context(), mo.types, mo.count)
			if !errors.Is(err, client.ErrUnreachable) {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "no agent at %s: reading the events ring buffer under %s\n", o.socket, o.bpfRoot)
			m, err := o.openMaps()
			if err != nil {
				return err
			}
			defer m.Close()
			r, err := m.NewEventReader()
			if err != nil {
				return err
			}
			return o.monitor(cmd.Context(), r, mo.types, mo.count)
		},
	}
	cmd.Flags().StringSliceVarP(&mo.types, "type", "t", nil, "only these event types: drop, trace, policy-verdict")
	cmd.Flags().IntVarP(&mo.count, "count", "n", 0, "stop after this many events; 0 runs until interrupted")
	return cmd
}

// errEnough ends a stream once count events were printed.
var errEnough = errors.New("enough events")

// monitorAgent prints the agent's events of types until ctx ends or
// count were printed.
func (o *options) monitorAgent(ctx context.Context, types []string, count int) error {
	n := 0
	err := o.client().Monitor(ctx, types, func(ev models.MonitorEvent) error {
		if err := o.printEvent(o.out, ev); err != nil {
			return err
		}
		if ev.Type != "lost" {
			n++
		}
		if count > 0 && n >= count {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

// monitor prints events of types (all when none) from r until ctx ends,
// r fails or count events were printed; it closes r.
func (o *options) monitor(ctx context.Context, r eventSource, types []string, count int) error {
	// Closing the reader is what unblocks a waiting Read.
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer func() {
		if stop() {
			r.Close()
		}
	}()
	for n := 0; count == 0 || n < count; {
		ev, err := r.Read()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, datapath.ErrNoEvent) {
				continue
			}
			return err
		}
		m := monitor.Model(ev)
		if len(types) > 0 && !slices.Contains(types, m.Type) {
			continue
		}
		if err := o.printEvent(o.out, m); err != nil {
			return err
		}
		n++
	}
	return nil
}

func (o *options) printEvent(w io.Writer, v models.MonitorEvent) error {
	if o.output == outputJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w, eventLine(v))
	return err
}

// eventLine is one event in one line, what first: "drop (Policy denied)
// ingress tcp 10.0.1.5:4000 -> 10.0.2.7:8080 identity 1234->5678 ...".
func eventLine(v models.MonitorEvent) string {
	if v.Type == "lost" {
		return fmt.Sprintf("lost %d events: this reader fell behind", v.Lost)
	}
	var b strings.Builder
	b.WriteString(v.Type)
	switch {
	case v.Point != "":
		fmt.Fprintf(&b, " %s", v.Point)
	case v.Verdict != "" && v.Reason != "":
		fmt.Fprintf(&b, " %s (%s)", v.Verdict, v.Reason)
	case v.Verdict != "":
		fmt.Fprintf(&b, " %s", v.Verdict)
	case v.Reason != "":
		fmt.Fprintf(&b, " (%s)", v.Reason)
	}
	if v.Direction != "" {
		fmt.Fprintf(&b, " %s", v.Direction)
	}
	fmt.Fprintf(&b, " %s %s -> %s identity %d->%d", v.Protocol, hostPort(v.Src, v.SrcPort), hostPort(v.Dst, v.DstPort),
		v.SrcIdentity, v.DstIdentity)
	if v.SrcEndpoint != 0 || v.DstEndpoint != 0 {
		fmt.Fprintf(&b, " endpoint %d->%d", v.SrcEndpoint, v.DstEndpoint)
	}
	if v.CT != "" {
		fmt.Fprintf(&b, " ct %s", v.CT)
	}
	fmt.Fprintf(&b, " ifindex %d len %d", v.Ifindex, v.Length)
	return b.String()
}

func hostPort(addr string, port uint16) string {
	if addr == "" {
		addr = "?"
	}
	if port == 0 {
		return addr
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		return netip.AddrPortFrom(a, port).String()
	}
	return fmt.Sprintf("%s:%d", addr, port)
}
