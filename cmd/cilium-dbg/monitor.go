package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/pkg/identity"
)

// eventSource is the datapath's event reader; tests feed their own.
type eventSource interface {
	Read() (datapath.Event, error)
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
		Long: "Reads the events ring buffer pinned under --bpf-root. The ring buffer has one\n" +
			"consumer at a time: events another reader takes do not show here.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keep, err := eventFilter(mo.types)
			if err != nil {
				return err
			}
			m, err := o.openMaps()
			if err != nil {
				return err
			}
			defer m.Close()
			r, err := m.NewEventReader()
			if err != nil {
				return err
			}
			return o.monitor(cmd.Context(), r, keep, mo.count)
		},
	}
	cmd.Flags().StringSliceVarP(&mo.types, "type", "t", nil, "only these event types: drop, trace, policy-verdict")
	cmd.Flags().IntVarP(&mo.count, "count", "n", 0, "stop after this many events; 0 runs until interrupted")
	return cmd
}

// eventFilter is the set of types to print; nil prints everything.
func eventFilter(names []string) (map[datapath.EventType]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]datapath.EventType{}
	for _, t := range []datapath.EventType{datapath.EventDrop, datapath.EventTrace, datapath.EventPolicyVerdict} {
		known[t.String()] = t
	}
	keep := map[datapath.EventType]bool{}
	for _, n := range names {
		t, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("--type %q: want drop, trace or policy-verdict", n)
		}
		keep[t] = true
	}
	return keep, nil
}

// monitor prints events from r until ctx ends, r fails or count events
// were printed; it closes r.
func (o *options) monitor(ctx context.Context, r eventSource, keep map[datapath.EventType]bool, count int) error {
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
		if keep != nil && !keep[ev.Type] {
			continue
		}
		if err := o.printEvent(o.out, ev); err != nil {
			return err
		}
		n++
	}
	return nil
}

// eventView is an event for -o json: one object per line.
type eventView struct {
	Type        string                   `json:"type"`
	Reason      string                   `json:"reason,omitempty"`
	ReasonCode  uint8                    `json:"reasonCode,omitempty"`
	Point       string                   `json:"point,omitempty"`
	Verdict     string                   `json:"verdict,omitempty"`
	Direction   string                   `json:"direction,omitempty"`
	CT          string                   `json:"ct,omitempty"`
	Protocol    string                   `json:"protocol"`
	Src         string                   `json:"src"`
	SrcPort     uint16                   `json:"srcPort"`
	Dst         string                   `json:"dst"`
	DstPort     uint16                   `json:"dstPort"`
	SrcIdentity identity.NumericIdentity `json:"srcIdentity"`
	DstIdentity identity.NumericIdentity `json:"dstIdentity"`
	SrcEndpoint uint16                   `json:"srcEndpoint,omitempty"`
	DstEndpoint uint16                   `json:"dstEndpoint,omitempty"`
	Ifindex     uint32                   `json:"ifindex"`
	Length      uint32                   `json:"length"`
}

func viewOf(ev datapath.Event) eventView {
	v := eventView{Type: ev.Type.String(), Protocol: protocolName(ev.Protocol), Src: addrOrEmpty(ev.Src),
		SrcPort: ev.SrcPort, Dst: addrOrEmpty(ev.Dst), DstPort: ev.DstPort, SrcIdentity: ev.SrcIdentity,
		DstIdentity: ev.DstIdentity, SrcEndpoint: ev.SrcEndpoint, DstEndpoint: ev.DstEndpoint,
		Ifindex: ev.Ifindex, Length: ev.Length}
	if ev.Direction != 0 {
		v.Direction = ev.Direction.String()
	}
	switch ev.Type {
	case datapath.EventTrace:
		v.Point = tracePointName(ev.Point)
	case datapath.EventDrop:
		v.Reason, v.ReasonCode = ev.Reason.String(), uint8(ev.Reason)
	case datapath.EventPolicyVerdict:
		v.Verdict, v.CT = verdictName(ev.Verdict), ctName(ev.CT)
		if ev.Verdict == datapath.VerdictDeny {
			v.Reason, v.ReasonCode = ev.Reason.String(), uint8(ev.Reason)
		}
	}
	return v
}

func (o *options) printEvent(w io.Writer, ev datapath.Event) error {
	v := viewOf(ev)
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

// eventLine is one event in one line, what first: "drop (policy denied)
// ingress tcp 10.0.1.5:4000 -> 10.0.2.7:8080 identity 1234->5678 ...".
func eventLine(v eventView) string {
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

func tracePointName(p datapath.TracePoint) string {
	switch p {
	case datapath.TraceToLXC:
		return "to-endpoint"
	case datapath.TraceToHost:
		return "to-host"
	case datapath.TraceToStack:
		return "to-stack"
	case datapath.TraceToOverlay:
		return "to-overlay"
	case datapath.TraceFromLXC:
		return "from-endpoint"
	case datapath.TraceFromHost:
		return "from-host"
	case datapath.TraceFromOverlay:
		return "from-overlay"
	case datapath.TraceFromNetwork:
		return "from-network"
	}
	return fmt.Sprintf("point(%d)", uint8(p))
}

func verdictName(v datapath.Verdict) string {
	switch v {
	case datapath.VerdictAllow:
		return "allowed"
	case datapath.VerdictDeny:
		return "denied"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

func ctName(c datapath.CTStatus) string {
	switch c {
	case datapath.CTNew:
		return "new"
	case datapath.CTEstablished:
		return "established"
	case datapath.CTReply:
		return "reply"
	case datapath.CTRelated:
		return "related"
	case datapath.CTInvalid:
		return "invalid"
	}
	return fmt.Sprintf("ct(%d)", uint8(c))
}
