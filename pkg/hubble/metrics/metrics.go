// Package metrics counts flows into Hubble's Prometheus metrics, with
// Cilium's names, labels and option syntax (--hubble-metrics):
//
//	flow drop tcp:sourceContext=pod;destinationContext=namespace|identity icmp
//	port-distribution policy:labelsContext=source_namespace,destination_namespace
//
// Each metric may add context labels: sourceContext and
// destinationContext (the first non-empty of identity, namespace, pod,
// pod-name, ip, reserved-identity, workload, workload-name, app) and
// labelsContext (source_ip, source_pod, source_namespace, source_workload,
// source_workload_kind, source_app, the destination_ ones and
// traffic_direction).
package metrics

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Spec is one metric asked for: its name and context.
type Spec struct {
	Name    string
	Context Context
}

// Context are the labels a metric adds to say who the flow was between.
type Context struct {
	Source, Destination []string // context identifiers, first non-empty wins
	Labels              []string // labelsContext, in Cilium's order
}

var contextIDs = []string{"identity", "namespace", "pod", "pod-name", "ip", "reserved-identity", "workload", "workload-name", "app"}

var contextLabels = []string{"source_ip", "source_pod", "source_namespace", "source_workload", "source_workload_kind", "source_app",
	"destination_ip", "destination_pod", "destination_namespace", "destination_workload", "destination_workload_kind",
	"destination_app", "traffic_direction"}

// Parse reads --hubble-metrics: metrics separated by spaces, each
// name[:option=value;option=value].
func Parse(s string) ([]Spec, error) {
	var out []Spec
	for _, field := range strings.Fields(s) {
		name, opts, _ := strings.Cut(field, ":")
		if _, ok := handlers[name]; !ok {
			return nil, fmt.Errorf("metric %q: cilium-go has flow, drop, tcp, port-distribution, icmp and policy", name)
		}
		if slices.ContainsFunc(out, func(o Spec) bool { return o.Name == name }) {
			return nil, fmt.Errorf("metric %q given twice", name)
		}
		spec := Spec{Name: name}
		for opt := range strings.SplitSeq(opts, ";") {
			if opt == "" {
				continue
			}
			key, value, ok := strings.Cut(opt, "=")
			if !ok || value == "" {
				return nil, fmt.Errorf("metric %s: option %q: want name=value", name, opt)
			}
			var err error
			switch strings.ToLower(key) {
			case "sourcecontext":
				spec.Context.Source, err = contextList(value)
			case "destinationcontext":
				spec.Context.Destination, err = contextList(value)
			case "labelscontext":
				spec.Context.Labels, err = labelList(value)
			default:
				err = fmt.Errorf("unknown option (cilium-go has sourceContext, destinationContext and labelsContext)")
			}
			if err != nil {
				return nil, fmt.Errorf("metric %s: option %s: %w", name, key, err)
			}
		}
		out = append(out, spec)
	}
	return out, nil
}

func contextList(v string) ([]string, error) {
	ids := strings.Split(v, "|")
	for _, id := range ids {
		if !slices.Contains(contextIDs, id) {
			return nil, fmt.Errorf("%q: want one of %s, joined by |", id, strings.Join(contextIDs, ", "))
		}
	}
	return ids, nil
}

func labelList(v string) ([]string, error) {
	want := strings.Split(v, ",")
	for _, l := range want {
		if !slices.Contains(contextLabels, l) {
			return nil, fmt.Errorf("%q: want some of %s", l, strings.Join(contextLabels, ", "))
		}
	}
	var out []string
	for _, l := range contextLabels {
		if slices.Contains(want, l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// names are the context's label names, after a metric's own.
func (c Context) names() []string {
	out := slices.Clone(c.Labels)
	if len(c.Source) > 0 {
		out = append(out, "source")
	}
	if len(c.Destination) > 0 {
		out = append(out, "destination")
	}
	return out
}

// values are the context's labels of f, in the order of names.
func (c Context) values(f *flow.Flow) []string {
	var out []string
	for _, l := range c.Labels {
		side, field, _ := strings.Cut(l, "_")
		ep, ip := f.GetSource(), f.GetIP().GetSource()
		if side == "destination" {
			ep, ip = f.GetDestination(), f.GetIP().GetDestination()
		}
		switch field {
		case "ip":
			out = append(out, ip)
		case "pod":
			out = append(out, ep.GetPodName())
		case "namespace":
			out = append(out, ep.GetNamespace())
		case "workload":
			out = append(out, workload(ep).GetName())
		case "workload_kind":
			out = append(out, workload(ep).GetKind())
		case "app":
			out = append(out, app(ep))
		case "direction": // traffic_direction
			out = append(out, strings.ToLower(f.GetTrafficDirection().String()))
		}
	}
	if len(c.Source) > 0 {
		out = append(out, contextValue(c.Source, f.GetSource(), f.GetIP().GetSource()))
	}
	if len(c.Destination) > 0 {
		out = append(out, contextValue(c.Destination, f.GetDestination(), f.GetIP().GetDestination()))
	}
	return out
}

func workload(ep *flow.Endpoint) *flow.Workload {
	if w := ep.GetWorkloads(); len(w) > 0 {
		return w[0]
	}
	return nil
}

// app is the endpoint's app: Kubernetes' recommended label, k8s-app, or
// app.
func app(ep *flow.Endpoint) string {
	for _, key := range []string{"k8s:app.kubernetes.io/name=", "k8s:k8s-app=", "k8s:app="} {
		for _, l := range ep.GetLabels() {
			if v, ok := strings.CutPrefix(l, key); ok && v != "" {
				return v
			}
		}
	}
	return ""
}

// contextValue is the first identifier of ids that says something of ep.
func contextValue(ids []string, ep *flow.Endpoint, ip string) string {
	for _, id := range ids {
		var v string
		switch id {
		case "identity":
			v = strings.Join(ep.GetLabels(), ",")
		case "namespace":
			v = ep.GetNamespace()
		case "pod":
			v = ep.GetPodName()
			if v != "" && ep.GetNamespace() != "" {
				v = ep.GetNamespace() + "/" + v
			}
		case "pod-name":
			v = ep.GetPodName()
		case "ip":
			v = ip
		case "reserved-identity":
			if i := slices.IndexFunc(ep.GetLabels(), func(l string) bool { return strings.HasPrefix(l, "reserved:") }); i >= 0 {
				v = ep.GetLabels()[i]
			}
		case "workload":
			v = workload(ep).GetName()
			if v != "" && ep.GetNamespace() != "" {
				v = ep.GetNamespace() + "/" + v
			}
		case "workload-name":
			v = workload(ep).GetName()
		case "app":
			v = app(ep)
		}
		if v != "" {
			return v
		}
	}
	return ""
}

// handler is one metric: its own labels, and how a flow counts.
type handler struct {
	name, help string
	labels     []string
	// count calls inc with the metric's own label values, once per
	// increment the flow makes.
	count func(f *flow.Flow, inc func(own ...string))
	// contextFirst puts the context labels before the metric's own,
	// as Cilium's drop metric has them.
	contextFirst bool
}

var handlers = map[string]handler{
	"flow": {name: "flows_processed_total", help: "Total number of flows processed",
		labels: []string{"protocol", "type", "subtype", "verdict"},
		count: func(f *flow.Flow, inc func(...string)) {
			typ, sub := "Unknown", strconv.Itoa(int(f.GetEventType().GetType()))
			switch f.GetEventType().GetType() {
			case flows.EventTypes["drop"]:
				typ, sub = "Drop", ""
			case flows.EventTypes["trace"]:
				typ, sub = "Trace", flows.TracePointName(f.GetEventType().GetSubType())
			case flows.EventTypes["policy-verdict"]:
				typ, sub = "PolicyVerdict", ""
			}
			inc(protocol(f), typ, sub, f.GetVerdict().String())
		}},
	// Drops are the datapath's drop events: a policy verdict that denied
	// is followed by the drop, and is counted once, there.
	"drop": {name: "drop_total", help: "Number of drops", labels: []string{"reason", "protocol"}, contextFirst: true,
		count: func(f *flow.Flow, inc func(...string)) {
			if f.GetVerdict() == flow.Verdict_DROPPED && f.GetEventType().GetType() == flows.EventTypes["drop"] {
				inc(f.GetDropReasonDesc().String(), protocol(f))
			}
		}},
	"tcp": {name: "tcp_flags_total", help: "TCP flag occurrences", labels: []string{"flag", "family"},
		count: func(f *flow.Flow, inc func(...string)) {
			fl := f.GetL4().GetTCP().GetFlags()
			if fl == nil || (f.GetVerdict() != flow.Verdict_FORWARDED && f.GetVerdict() != flow.Verdict_REDIRECTED) {
				return
			}
			family := f.GetIP().GetIpVersion().String()
			if fl.GetFIN() {
				inc("FIN", family)
			}
			switch {
			case fl.GetSYN() && fl.GetACK():
				inc("SYN-ACK", family)
			case fl.GetSYN():
				inc("SYN", family)
			}
			if fl.GetRST() {
				inc("RST", family)
			}
		}},
	"port-distribution": {name: "port_distribution_total", help: "Numbers of packets distributed by destination port",
		labels: []string{"protocol", "port"},
		count: func(f *flow.Flow, inc func(...string)) {
			if f.GetVerdict() != flow.Verdict_FORWARDED && f.GetVerdict() != flow.Verdict_REDIRECTED {
				return
			}
			if _, dst, ok := flows.Ports(f); ok {
				inc(protocol(f), strconv.Itoa(int(dst)))
			} else if f.GetL4().GetICMPv4() != nil {
				inc("ICMPv4", "0")
			}
		}},
	"icmp": {name: "icmp_total", help: "Number of ICMP messages", labels: []string{"family", "type"},
		count: func(f *flow.Flow, inc func(...string)) {
			if icmp := f.GetL4().GetICMPv4(); icmp != nil {
				inc("IPv4", icmpType(icmp.GetType(), icmp.GetCode()))
			}
		}},
	"policy": {name: "policy_verdicts_total", help: "Total number of Cilium network policy verdicts",
		labels: []string{"direction", "match", "action"},
		count: func(f *flow.Flow, inc func(...string)) {
			if f.GetEventType().GetType() != flows.EventTypes["policy-verdict"] || f.GetSource().GetIdentity() == uint32(identity.Host) {
				return
			}
			inc(strings.ToLower(f.GetTrafficDirection().String()), policyMatch(f), strings.ToLower(f.GetVerdict().String()))
		}},
}

// protocol is the flow's L4 as Cilium's metrics name it.
func protocol(f *flow.Flow) string {
	if p := strings.ToUpper(flows.Protocol(f)); p != "" {
		if p == "ICMPV4" {
			return "ICMPv4"
		}
		return p
	}
	return "Unknown L4"
}

// policyMatch is how a verdict matched: all, l3-only, l3-l4, l4-only or
// none, from the flow's policy_match_type (Cilium's numbers).
func policyMatch(f *flow.Flow) string {
	switch f.GetPolicyMatchType() {
	case 1:
		return "l3-only"
	case 2:
		return "l3-l4"
	case 3:
		return "l4-only"
	case 4:
		return "all"
	}
	return "none"
}

// icmpType names the ICMPv4 messages pods send, as gopacket does for
// Cilium's metric; others by number.
func icmpType(typ, code uint32) string {
	switch typ {
	case 0:
		return "EchoReply"
	case 8:
		return "EchoRequest"
	case 3:
		names := []string{"Net", "Host", "Protocol", "Port", "FragmentationNeeded"}
		if int(code) < len(names) {
			return "DestinationUnreachable(" + names[code] + ")"
		}
		return "DestinationUnreachable(" + strconv.Itoa(int(code)) + ")"
	case 11:
		return "TimeExceeded"
	}
	return strconv.Itoa(int(typ)) + "(" + strconv.Itoa(int(code)) + ")"
}

// metric is a handler with its context, registered.
type metric struct {
	h   handler
	ctx Context
	vec *prometheus.CounterVec
}

// Metrics counts flows into the metrics asked for.
type Metrics struct{ metrics []metric }

// New registers specs' metrics on reg.
func New(specs []Spec, reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{}
	for _, s := range specs {
		h := handlers[s.Name]
		labels := append(slices.Clone(h.labels), s.Context.names()...)
		if h.contextFirst {
			labels = append(s.Context.names(), h.labels...)
		}
		vec := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "hubble", Name: h.name, Help: h.help}, labels)
		if err := reg.Register(vec); err != nil {
			return nil, fmt.Errorf("metric %s: %w", s.Name, err)
		}
		m.metrics = append(m.metrics, metric{h: h, ctx: s.Context, vec: vec})
	}
	return m, nil
}

// Process counts f.
func (m *Metrics) Process(f *flow.Flow) {
	for _, mt := range m.metrics {
		var ctx []string
		mt.h.count(f, func(own ...string) {
			if ctx == nil {
				ctx = mt.ctx.values(f)
			}
			vals := append(slices.Clone(own), ctx...)
			if mt.h.contextFirst {
				vals = append(slices.Clone(ctx), own...)
			}
			mt.vec.WithLabelValues(vals...).Inc()
		})
	}
}
