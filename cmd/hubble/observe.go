package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	relaypb "github.com/cilium/cilium/api/v1/relay"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
)

type observeOptions struct {
	last, first   uint64
	follow        bool
	since, until  string
	output        string
	printPolicies bool

	// Flags of either side, of the source side, of the destination side.
	pod, fromPod, toPod                []string
	namespace, fromNS, toNS            []string
	ip, fromIP, toIP                   []string
	label, fromLabel, toLabel          []string
	port, fromPort, toPort             []string
	identity, fromIdentity, toIdentity []uint
	service, fromService, toService    []string
	fqdn, fromFQDN, toFQDN             []string
	// Flags of the flow as a whole.
	verdict, protocol, types, dropReasons, directions, nodeNames, tcpFlags []string
	// Flags of L7 flows' HTTP records.
	httpStatus, httpMethod, httpPath, httpURL, httpHeader []string
}

func newObserveCommand(g *globals) *cobra.Command {
	cmd, _ := observeCommand(g)
	return cmd
}

// observeCommand is the command and the options its flags fill.
func observeCommand(g *globals) (*cobra.Command, *observeOptions) {
	o := &observeOptions{}
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Show flows: the last ones, then (with --follow) new ones as they come",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := o.request(cmd, time.Now())
			if err != nil {
				return err
			}
			p, err := newPrinter(o.output, g.out, o.printPolicies)
			if err != nil {
				return err
			}
			c, closeConn, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeConn()
			return observe(cmd.Context(), c, req, p, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.windowFlags(f, "flows")
	f.StringVarP(&o.output, "output", "o", "compact", "compact, dict, json, jsonpb or table")
	f.BoolVar(&o.printPolicies, "print-policy-names", false, "name the policies that allowed or denied a flow (compact output)")
	for _, s := range []struct {
		either, from, to *[]string
		name, help       string
	}{
		{&o.pod, &o.fromPod, &o.toPod, "pod", "pod name prefix, [namespace/]pod"},
		{&o.namespace, &o.fromNS, &o.toNS, "namespace", "namespace"},
		{&o.ip, &o.fromIP, &o.toIP, "ip", "IP address or prefix"},
		{&o.label, &o.fromLabel, &o.toLabel, "label", "label selector (app=x,k8s:tier in (a,b))"},
		{&o.port, &o.fromPort, &o.toPort, "port", "L4 port"},
		{&o.service, &o.fromService, &o.toService, "service", "Service, [namespace/]name prefix"},
		{&o.fqdn, &o.fromFQDN, &o.toFQDN, "fqdn", "DNS name pattern (*.cilium.io)"},
	} {
		f.StringSliceVar(s.either, s.name, nil, "flows from or to this "+s.help)
		f.StringSliceVar(s.from, "from-"+s.name, nil, "flows from this "+s.help)
		f.StringSliceVar(s.to, "to-"+s.name, nil, "flows to this "+s.help)
	}
	f.UintSliceVar(&o.identity, "identity", nil, "flows from or to this security identity")
	f.UintSliceVar(&o.fromIdentity, "from-identity", nil, "flows from this security identity")
	f.UintSliceVar(&o.toIdentity, "to-identity", nil, "flows to this security identity")
	f.StringSliceVar(&o.verdict, "verdict", nil, "FORWARDED, DROPPED, ERROR, AUDIT, REDIRECTED, TRACED or TRANSLATED")
	f.StringSliceVar(&o.protocol, "protocol", nil, "L4 or L7 protocol: tcp, udp, sctp, icmp, icmpv4, icmpv6, dns or http")
	f.StringSliceVarP(&o.types, "type", "t", nil,
		"event type: drop, trace, policy-verdict, trace-sock, l7 or a number (trace:to-endpoint and the like name an observation point)")
	f.StringSliceVar(&o.dropReasons, "drop-reason-desc", nil, "drop reason, as Hubble names it (POLICY_DENIED)")
	f.StringSliceVar(&o.directions, "traffic-direction", nil, "ingress or egress")
	f.StringSliceVar(&o.nodeNames, "node-name", nil, "node name pattern (node-*)")
	f.StringArrayVar(&o.tcpFlags, "tcp-flags", nil, "flows with these TCP flags set: SYN,ACK has both; repeated, any of the sets")
	f.StringSliceVar(&o.httpStatus, "http-status", nil, "HTTP status code or prefix (404, 5+)")
	f.StringSliceVar(&o.httpMethod, "http-method", nil, "HTTP method (get, post)")
	// Regular expressions and headers may hold commas: one value a flag.
	f.StringArrayVar(&o.httpPath, "http-path", nil, `HTTP path regular expression (/page/\d+)`)
	f.StringArrayVar(&o.httpURL, "http-url", nil, `HTTP URL regular expression (http://.*cilium\.io/page/\d+)`)
	f.StringArrayVar(&o.httpHeader, "http-header", nil, "HTTP header, name:value")
	cmd.AddCommand(newAgentEventsCommand(g))
	return cmd, o
}

// request builds the GetFlows request the flags ask for.
func (o *observeOptions) request(cmd *cobra.Command, now time.Time) (*observer.GetFlowsRequest, error) {
	w, err := o.window(cmd, now)
	if err != nil {
		return nil, err
	}
	req := &observer.GetFlowsRequest{Number: w.number, First: w.first, Follow: o.follow, Since: w.since, Until: w.until}
	if err := fqdnConflicts(cmd.Flags()); err != nil {
		return nil, err
	}
	src, dst, err := o.filters()
	if err != nil {
		return nil, err
	}
	req.Whitelist = []*flow.FlowFilter{src}
	if dst != nil {
		req.Whitelist = append(req.Whitelist, dst)
	}
	return req, nil
}

// fqdnConflicts refuses, as Hubble does, a side named both by DNS names
// and by address, pod or namespace, and --fqdn with --from-fqdn or
// --to-fqdn.
func fqdnConflicts(fs *pflag.FlagSet) error {
	for _, side := range []string{"from", "to"} {
		var changed []string
		for _, name := range []string{"fqdn", side + "-fqdn", "ip", side + "-ip", "pod", side + "-pod", "namespace", side + "-namespace"} {
			if fs.Changed(name) {
				changed = append(changed, name)
			}
		}
		// The fqdn flags come first: a conflict has one of them.
		if len(changed) > 1 && strings.HasSuffix(changed[0], "fqdn") {
			return fmt.Errorf("filters --%s and --%s cannot be combined", changed[0], changed[1])
		}
	}
	return nil
}

// window is what --last, --first, --since and --until ask for.
type window struct {
	number       uint64
	first        bool
	since, until *timestamppb.Timestamp
}

func (o *observeOptions) window(cmd *cobra.Command, now time.Time) (window, error) {
	w := window{number: o.last}
	if o.first > 0 {
		if o.last > 0 {
			return w, errors.New("--first and --last: give one")
		}
		w.number, w.first = o.first, true
	}
	for _, t := range []struct {
		flag, value string
		into        **timestamppb.Timestamp
	}{{"--since", o.since, &w.since}, {"--until", o.until, &w.until}} {
		if t.value == "" {
			continue
		}
		at, err := parseTime(t.value, now)
		if err != nil {
			return w, fmt.Errorf("%s %q: %w", t.flag, t.value, err)
		}
		*t.into = timestamppb.New(at)
	}
	if w.number == 0 && !o.follow && w.since == nil && w.until == nil && !cmd.Flags().Changed("last") {
		w.number = 20
	}
	return w, nil
}

// windowFlags are the flags of what to show, for flows or agent events.
func (o *observeOptions) windowFlags(f *pflag.FlagSet, what string) {
	f.Uint64Var(&o.last, "last", 0, "the last N "+what+" (default 20 when neither --follow, --first, --since nor --until is given)")
	f.Uint64Var(&o.first, "first", 0, "the first N "+what+" the server holds")
	f.BoolVarP(&o.follow, "follow", "f", false, "go on showing new "+what+" as they come")
	f.StringVar(&o.since, "since", "", what+" since this time: RFC 3339 or a duration ago (5m)")
	f.StringVar(&o.until, "until", "", what+" until this time: RFC 3339 or a duration ago (1m)")
}

// newAgentEventsCommand is `hubble observe agent-events`: the agents'
// starts, endpoints created and deleted, policies changed.
func newAgentEventsCommand(g *globals) *cobra.Command {
	o := &observeOptions{}
	cmd := &cobra.Command{
		Use:   "agent-events",
		Short: "Show the agents' events: starts, endpoints created and deleted, policies changed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := o.window(cmd, time.Now())
			if err != nil {
				return err
			}
			if o.output != "compact" && o.output != "json" && o.output != "jsonpb" {
				return fmt.Errorf("--output %q: want compact, json or jsonpb", o.output)
			}
			c, closeConn, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeConn()
			stream, err := c.GetAgentEvents(cmd.Context(), &observer.GetAgentEventsRequest{Number: w.number, First: w.first,
				Follow: o.follow, Since: w.since, Until: w.until}, grpc.WaitForReady(true))
			if err != nil {
				return err
			}
			for {
				r, err := stream.Recv()
				switch {
				case errors.Is(err, io.EOF):
					return nil
				case status.Code(err) == codes.Canceled && cmd.Context().Err() != nil:
					return nil
				case err != nil:
					return err
				}
				if o.output == "compact" {
					fmt.Fprintf(g.out, "%s [%s]: %s (%s)\n", r.GetTime().AsTime().Local().Format(timeFormat), r.GetNodeName(),
						r.GetAgentEvent().GetType(), agentEventDetails(r.GetAgentEvent()))
					continue
				}
				if err := printJSON(g.out, r); err != nil {
					return err
				}
			}
		},
	}
	o.windowFlags(cmd.Flags(), "agent events")
	cmd.Flags().StringVarP(&o.output, "output", "o", "compact", "compact, json or jsonpb")
	return cmd
}

// agentEventDetails is what Hubble prints of an agent event.
func agentEventDetails(e *flow.AgentEvent) string {
	switch {
	case e.GetAgentStart() != nil:
		return "start time: " + e.GetAgentStart().GetTime().AsTime().Local().Format(timeFormat)
	case e.GetPolicyUpdate() != nil:
		p := e.GetPolicyUpdate()
		return fmt.Sprintf("labels: [%s], revision: %d, count: %d", strings.Join(p.GetLabels(), ","), p.GetRevision(), p.GetRuleCount())
	case e.GetEndpointUpdate() != nil:
		ep := e.GetEndpointUpdate()
		var b strings.Builder
		fmt.Fprintf(&b, "id: %d", ep.GetId())
		if n := ep.GetNamespace(); n != "" {
			fmt.Fprintf(&b, ", namespace: %s", n)
		}
		if n := ep.GetPodName(); n != "" {
			fmt.Fprintf(&b, ", pod name: %s", n)
		}
		return b.String()
	case e.GetEndpointRegenerate() != nil:
		ep := e.GetEndpointRegenerate()
		s := fmt.Sprintf("id: %d, labels: [%s]", ep.GetId(), strings.Join(ep.GetLabels(), ","))
		if err := ep.GetError(); err != "" {
			s += ", error: " + err
		}
		return s
	}
	return ""
}

// filters builds Hubble's pair of filters: a flag of either side goes
// into the first as the source and into the second as the destination;
// every other flag goes into both. Without such a flag one filter does.
func (o *observeOptions) filters() (src, dst *flow.FlowFilter, err error) {
	src, dst = &flow.FlowFilter{}, &flow.FlowFilter{}
	either := false
	sides := func(all, from, to []string, srcField, dstField func(*flow.FlowFilter) *[]string) {
		for _, f := range []*flow.FlowFilter{src, dst} {
			*srcField(f) = append(*srcField(f), from...)
			*dstField(f) = append(*dstField(f), to...)
		}
		if len(all) > 0 {
			either = true
			*srcField(src) = append(*srcField(src), all...)
			*dstField(dst) = append(*dstField(dst), all...)
		}
	}
	nsPods := func(ns []string) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n+"/")
		}
		return out
	}
	podOf := func(pods []string) []string {
		// As Hubble: a pod without a namespace is of --namespace's when
		// exactly one is given.
		var out []string
		for _, p := range pods {
			if !strings.Contains(p, "/") && len(o.namespace) == 1 {
				p = o.namespace[0] + "/" + p
			}
			out = append(out, p)
		}
		return out
	}
	sourcePod := func(f *flow.FlowFilter) *[]string { return &f.SourcePod }
	destinationPod := func(f *flow.FlowFilter) *[]string { return &f.DestinationPod }
	sides(podOf(o.pod), podOf(o.fromPod), podOf(o.toPod), sourcePod, destinationPod)
	if len(o.pod) == 0 || len(o.namespace) != 1 { // else the pods name it
		sides(nsPods(o.namespace), nsPods(o.fromNS), nsPods(o.toNS), sourcePod, destinationPod)
	}
	sides(o.ip, o.fromIP, o.toIP, func(f *flow.FlowFilter) *[]string { return &f.SourceIp },
		func(f *flow.FlowFilter) *[]string { return &f.DestinationIp })
	sides(o.label, o.fromLabel, o.toLabel, func(f *flow.FlowFilter) *[]string { return &f.SourceLabel },
		func(f *flow.FlowFilter) *[]string { return &f.DestinationLabel })
	sides(o.port, o.fromPort, o.toPort, func(f *flow.FlowFilter) *[]string { return &f.SourcePort },
		func(f *flow.FlowFilter) *[]string { return &f.DestinationPort })
	sides(o.service, o.fromService, o.toService, func(f *flow.FlowFilter) *[]string { return &f.SourceService },
		func(f *flow.FlowFilter) *[]string { return &f.DestinationService })
	sides(o.fqdn, o.fromFQDN, o.toFQDN, func(f *flow.FlowFilter) *[]string { return &f.SourceFqdn },
		func(f *flow.FlowFilter) *[]string { return &f.DestinationFqdn })
	ids := func(in []uint) []uint32 {
		out := make([]uint32, 0, len(in))
		for _, n := range in {
			out = append(out, uint32(n))
		}
		return out
	}
	for _, f := range []*flow.FlowFilter{src, dst} {
		f.SourceIdentity = append(f.SourceIdentity, ids(o.fromIdentity)...)
		f.DestinationIdentity = append(f.DestinationIdentity, ids(o.toIdentity)...)
	}
	if len(o.identity) > 0 {
		either = true
		src.SourceIdentity = append(src.SourceIdentity, ids(o.identity)...)
		dst.DestinationIdentity = append(dst.DestinationIdentity, ids(o.identity)...)
	}
	common, err := o.flowFields()
	if err != nil {
		return nil, nil, err
	}
	for _, f := range []*flow.FlowFilter{src, dst} {
		proto.Merge(f, common)
	}
	if !either {
		return src, nil, nil
	}
	return src, dst, nil
}

// flowFields are the fields of the flow as a whole, which both filters
// of the pair have.
func (o *observeOptions) flowFields() (*flow.FlowFilter, error) {
	common := &flow.FlowFilter{NodeName: o.nodeNames, Protocol: o.protocol, HttpStatusCode: o.httpStatus, HttpMethod: o.httpMethod,
		HttpPath: o.httpPath, HttpUrl: o.httpURL}
	for _, h := range o.httpHeader {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return nil, fmt.Errorf("--http-header %q: want name:value", h)
		}
		common.HttpHeader = append(common.HttpHeader, &flow.HTTPHeader{Key: k, Value: v})
	}
	for _, v := range o.verdict {
		n, ok := flow.Verdict_value[strings.ToUpper(v)]
		if !ok || n == 0 {
			return nil, fmt.Errorf("--verdict %q: want FORWARDED, DROPPED, ERROR, AUDIT, REDIRECTED, TRACED or TRANSLATED", v)
		}
		common.Verdict = append(common.Verdict, flow.Verdict(n))
	}
	for _, t := range o.types {
		et, err := eventType(t)
		if err != nil {
			return nil, err
		}
		common.EventType = append(common.EventType, et)
	}
	for _, r := range o.dropReasons {
		n, ok := flow.DropReason_value[strings.ToUpper(r)]
		if !ok {
			return nil, fmt.Errorf("--drop-reason-desc %q: not one of Hubble's drop reasons", r)
		}
		common.DropReasonDesc = append(common.DropReasonDesc, flow.DropReason(n))
	}
	for _, d := range o.directions {
		n, ok := flow.TrafficDirection_value[strings.ToUpper(d)]
		if !ok || n == 0 {
			return nil, fmt.Errorf("--traffic-direction %q: want ingress or egress", d)
		}
		common.TrafficDirection = append(common.TrafficDirection, flow.TrafficDirection(n))
	}
	for _, fl := range o.tcpFlags {
		tf := &flow.TCPFlags{}
		for _, name := range strings.Split(fl, ",") {
			set := map[string]*bool{"SYN": &tf.SYN, "FIN": &tf.FIN, "RST": &tf.RST, "PSH": &tf.PSH, "ACK": &tf.ACK,
				"URG": &tf.URG, "ECE": &tf.ECE, "CWR": &tf.CWR, "NS": &tf.NS}[strings.ToUpper(name)]
			if set == nil {
				return nil, fmt.Errorf("--tcp-flags %q: %q is not a TCP flag", fl, name)
			}
			*set = true
		}
		common.TcpFlags = append(common.TcpFlags, tf)
	}
	return common, nil
}

// eventType reads --type: a type by its name (drop, trace, l7, ...) or
// number, as Hubble's, and an optional subtype (trace:to-endpoint).
func eventType(s string) (*flow.EventTypeFilter, error) {
	name, sub, hasSub := strings.Cut(s, ":")
	t, ok := flows.EventTypes[name]
	if !ok {
		n, err := strconv.ParseUint(name, 10, 31)
		if err != nil {
			return nil, fmt.Errorf("--type %q: want drop, trace, policy-verdict, trace-sock, l7 or a number", s)
		}
		t = int32(n)
	}
	f := &flow.EventTypeFilter{Type: t}
	if hasSub {
		n, ok := flows.TracePoints[sub]
		if !ok {
			v, err := strconv.ParseInt(sub, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--type %q: %q is neither a trace point nor a number", s, sub)
			}
			n = int32(v)
		}
		f.MatchSubType, f.SubType = true, n
	}
	return f, nil
}

// parseTime reads RFC 3339 or a duration before now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("neither RFC 3339 nor a duration")
	}
	return t, nil
}

// observe prints the responses to req until the server ends the stream
// or ctx ends. A relay's word on nodes that do not answer goes to errw.
func observe(ctx context.Context, c observer.ObserverClient, req *observer.GetFlowsRequest, p printer, errw io.Writer) error {
	stream, err := c.GetFlows(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	defer p.flush()
	for {
		resp, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case status.Code(err) == codes.Canceled && ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
		if s := resp.GetNodeStatus(); s != nil {
			if line := nodeStatusLine(resp); line != "" {
				fmt.Fprintln(errw, line)
			}
			continue
		}
		if err := p.print(resp); err != nil {
			return err
		}
	}
}

// nodeStatusLine is Hubble's warning about nodes a relay could not ask;
// empty for the informational ones.
func nodeStatusLine(resp *observer.GetFlowsResponse) string {
	s := resp.GetNodeStatus()
	prefix := fmt.Sprintf("%s [%s]", resp.GetTime().AsTime().Local().Format(timeFormat), resp.GetNodeName())
	nodes := strings.Join(s.GetNodeNames(), ", ")
	switch s.GetStateChange() {
	case relaypb.NodeState_NODE_UNAVAILABLE:
		return fmt.Sprintf("%s: %d nodes are unavailable: %s", prefix, len(s.GetNodeNames()), nodes)
	case relaypb.NodeState_NODE_ERROR:
		return fmt.Sprintf("%s: Error %q on %d nodes: %s", prefix, s.GetMessage(), len(s.GetNodeNames()), nodes)
	}
	return ""
}
