package main

//lint:file-ignore SA1019 a socket trace's and an L7 flow's Summary (deprecated in flow.proto) are their words; Cilium's agents still send it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
)

// printer writes responses in one of Hubble's output formats.
type printer interface {
	print(*observer.GetFlowsResponse) error
	flush()
}

func newPrinter(format string, w io.Writer, policies bool) (printer, error) {
	switch format {
	case "compact":
		return &textPrinter{w: w, policies: policies, write: compactLine}, nil
	case "dict":
		return &textPrinter{w: w, write: dictBlock}, nil
	case "table":
		tw := tabwriter.NewWriter(w, 2, 0, 3, ' ', 0)
		return &textPrinter{w: tw, tw: tw, write: tableRow}, nil
	case "json", "jsonpb":
		return jsonPrinter{w: w}, nil
	}
	return nil, fmt.Errorf("--output %q: want compact, dict, json, jsonpb or table", format)
}

type textPrinter struct {
	w        io.Writer
	tw       *tabwriter.Writer
	policies bool
	lines    int
	write    func(p *textPrinter, f *flow.Flow) error
}

func (p *textPrinter) print(resp *observer.GetFlowsResponse) error {
	if lost := resp.GetLostEvents(); lost != nil {
		_, err := fmt.Fprintf(p.w, "EVENTS LOST: %s CPU(%d) %d\n", lost.GetSource(), lost.GetCpu().GetValue(), lost.GetNumEventsLost())
		return err
	}
	f := resp.GetFlow()
	if f == nil {
		return nil
	}
	err := p.write(p, f)
	p.lines++
	return err
}

func (p *textPrinter) flush() {
	if p.tw != nil {
		p.tw.Flush()
	}
}

const timeFormat = time.StampMilli

func compactLine(p *textPrinter, f *flow.Flow) error {
	src, dst := endpointName(f, true), endpointName(f, false)
	srcID, dstID := identityName(f.GetSource()), identityName(f.GetDestination())
	arrow := "->"
	switch {
	case f.GetIsReply() == nil:
		arrow = "<>" // direction unknown
	case f.GetIsReply().GetValue():
		src, dst, srcID, dstID, arrow = dst, src, dstID, srcID, "<-"
	}
	line := fmt.Sprintf("%s: %s %s %s %s %s %s %s (%s)", f.GetTime().AsTime().Local().Format(timeFormat),
		src, srcID, arrow, dst, dstID, flowType(f), f.GetVerdict(), summary(f))
	if p.policies {
		if names := policyNames(f); names != "" {
			line += " " + names
		}
	}
	_, err := fmt.Fprintln(p.w, line)
	return err
}

func dictBlock(p *textPrinter, f *flow.Flow) error {
	if p.lines > 0 {
		if _, err := fmt.Fprintln(p.w, "------------"); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.w, "  TIMESTAMP: %s\n     SOURCE: %s\nDESTINATION: %s\n       TYPE: %s\n    VERDICT: %s\n    SUMMARY: %s\n",
		f.GetTime().AsTime().Local().Format(timeFormat), endpointName(f, true), endpointName(f, false), flowType(f), f.GetVerdict(), summary(f))
	return err
}

func tableRow(p *textPrinter, f *flow.Flow) error {
	if p.lines == 0 {
		if _, err := fmt.Fprintln(p.w, "TIMESTAMP\tSOURCE\tDESTINATION\tTYPE\tVERDICT\tSUMMARY"); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.w, "%s\t%s\t%s\t%s\t%s\t%s\n", f.GetTime().AsTime().Local().Format(timeFormat),
		endpointName(f, true), endpointName(f, false), flowType(f), f.GetVerdict(), summary(f))
	return err
}

// jsonPrinter writes each response as a line of protobuf JSON, as
// Hubble's jsonpb output.
type jsonPrinter struct{ w io.Writer }

func (p jsonPrinter) print(resp *observer.GetFlowsResponse) error { return printJSON(p.w, resp) }

// printJSON writes m as one line of protobuf JSON with the fields' proto
// names, as Hubble's CLI prints them (source_port, not sourcePort).
// protojson varies its whitespace from one build to the next on purpose;
// the line is compacted so that what users grep and scripts match is the
// same with every build.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		return err
	}
	line.WriteByte('\n')
	_, err = w.Write(line.Bytes())
	return err
}

func (jsonPrinter) flush() {}

// endpointName is one side as namespace/pod:port, else the Service it
// is as namespace/service:port, else its DNS names as name,name:port,
// else address:port, as Hubble's.
func endpointName(f *flow.Flow, source bool) string {
	ep, addr, svc, names := f.GetDestination(), f.GetIP().GetDestination(), f.GetDestinationService(), f.GetDestinationNames()
	if source {
		ep, addr, svc, names = f.GetSource(), f.GetIP().GetSource(), f.GetSourceService(), f.GetSourceNames()
	}
	name := addr
	switch {
	case ep.GetPodName() != "":
		name = ep.GetNamespace() + "/" + ep.GetPodName()
	case svc.GetName() != "":
		name = svc.GetNamespace() + "/" + svc.GetName()
	case len(names) > 0:
		name = strings.Join(names, ",")
	}
	if src, dst, ok := flows.Ports(f); ok {
		port := dst
		if source {
			port = src
		}
		name += ":" + strconv.Itoa(int(port))
	}
	return name
}

// identityName is (ID:n) for a cluster identity, or the reserved
// identity's name.
func identityName(ep *flow.Endpoint) string {
	for _, l := range ep.GetLabels() {
		if name, ok := strings.CutPrefix(l, "reserved:"); ok {
			name, _, _ = strings.Cut(name, "=")
			return "(" + name + ")"
		}
	}
	return fmt.Sprintf("(ID:%d)", ep.GetIdentity())
}

// flowType is what Hubble shows as the TYPE: the observation point of a
// trace, the reason of a drop, policy-verdict with the direction, and an
// L7 record's protocol and kind (http-request, dns-response proxy).
func flowType(f *flow.Flow) string {
	if l7 := f.GetL7(); l7 != nil {
		protocol, kind := "l7", strings.ToLower(l7.GetType().String())
		switch {
		case l7.GetHttp() != nil:
			protocol = "http"
		case l7.GetDns() != nil:
			protocol, kind = "dns", kind+" "+l7.GetDns().GetObservationSource()
		}
		return protocol + "-" + kind
	}
	sub := f.GetEventType().GetSubType()
	switch f.GetEventType().GetType() {
	case flows.EventTypes["trace"]:
		if name := flows.TracePointName(sub); name != "" {
			return name
		}
		return fmt.Sprintf("trace:%d", sub)
	case flows.EventTypes["drop"]:
		return reasonText(flow.DropReason(sub))
	case flows.EventTypes["policy-verdict"]:
		return "policy-verdict:" + f.GetTrafficDirection().String()
	case flows.EventTypes["trace-sock"]:
		switch f.GetSockXlatePoint() {
		case flow.SocketTranslationPoint_SOCK_XLATE_POINT_PRE_DIRECTION_FWD:
			return "pre-xlate-fwd"
		case flow.SocketTranslationPoint_SOCK_XLATE_POINT_POST_DIRECTION_FWD:
			return "post-xlate-fwd"
		}
		return fmt.Sprintf("trace-sock:%d", sub)
	}
	return "unknown"
}

// reasonText is a drop reason's name as words: Policy denied.
func reasonText(r flow.DropReason) string {
	s := strings.ToLower(strings.ReplaceAll(r.String(), "_", " "))
	if s == "" {
		return "drop"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// summary is the flow's L4 in a few words, or its L7 record's.
func summary(f *flow.Flow) string {
	if l7 := f.GetL7(); l7 != nil {
		if s := f.GetSummary(); s != "" {
			return s
		}
		// Summary is deprecated: a server may leave it out.
		return flows.L7Summary(l7)
	}
	// A socket trace has ports but no packet: its summary says TCP or UDP.
	if f.GetSummary() != "" && (f.GetL4() == nil || f.GetType() == flow.FlowType_SOCK) {
		return f.GetSummary()
	}
	return flows.Summary(f)
}

// policyNames lists the policies behind a flow's verdict.
func policyNames(f *flow.Flow) string {
	var parts []string
	for _, set := range []struct {
		name     string
		policies []*flow.Policy
	}{{"ingress-allowed-by", f.GetIngressAllowedBy()}, {"egress-allowed-by", f.GetEgressAllowedBy()},
		{"ingress-denied-by", f.GetIngressDeniedBy()}, {"egress-denied-by", f.GetEgressDeniedBy()}} {
		var names []string
		for _, p := range set.policies {
			n := p.GetKind() + ":" + p.GetName()
			if p.GetNamespace() != "" {
				n = p.GetKind() + ":" + p.GetNamespace() + "/" + p.GetName()
			}
			names = append(names, n)
		}
		if len(names) > 0 {
			parts = append(parts, set.name+"="+strings.Join(names, ","))
		}
	}
	return strings.Join(parts, " ")
}
