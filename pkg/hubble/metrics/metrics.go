// Package metrics counts flows into Hubble's Prometheus metrics, with
// Cilium's names, labels and option syntax (--hubble-metrics):
//
//	flow drop tcp:sourceContext=pod;destinationContext=namespace|identity icmp
//	port-distribution policy:labelsContext=source_namespace,destination_namespace
//	dns:query;ignoreAAAA httpV2:sourceContext=workload
//
// Each metric may add context labels: sourceContext and
// destinationContext (the first non-empty of identity, namespace, pod,
// pod-name, ip, reserved-identity, workload, workload-name, app) and
// labelsContext (source_ip, source_pod, source_namespace, source_workload,
// source_workload_kind, source_app, the destination_ ones and
// traffic_direction).
package metrics

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cilium-go/cilium/pkg/hubble/flows"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Spec is one metric asked for: its name, context and own options.
type Spec struct {
	Name    string
	Context Context
	// Options are the metric's own options that are on, given without a
	// value (dns: query, ignoreAAAA), as the metric spells them.
	Options []string
}

// has says whether the option is on.
func (s Spec) has(option string) bool { return slices.Contains(s.Options, option) }

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
// name[:option=value;option], an option without a value being one of the
// metric's own (dns:query).
func Parse(s string) ([]Spec, error) {
	var out []Spec
	for _, field := range strings.Fields(s) {
		name, opts, _ := strings.Cut(field, ":")
		h, ok := handlers[name]
		if !ok {
			return nil, fmt.Errorf("metric %q: cilium-go has %s", name, strings.Join(slices.Sorted(maps.Keys(handlers)), ", "))
		}
		for _, o := range out {
			switch o.Name {
			case name:
				return nil, fmt.Errorf("metric %q given twice", name)
			case h.conflicts:
				return nil, fmt.Errorf("metrics %q and %q: give one of them", o.Name, name)
			}
		}
		spec := Spec{Name: name}
		for opt := range strings.SplitSeq(opts, ";") {
			if opt == "" {
				continue
			}
			if i := slices.IndexFunc(h.options, func(o string) bool { return strings.EqualFold(o, opt) }); i >= 0 {
				spec.Options = append(spec.Options, h.options[i])
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
				err = errors.New("unknown option (cilium-go has sourceContext, destinationContext and labelsContext)")
				if len(h.options) > 0 {
					err = fmt.Errorf("unknown option (cilium-go has sourceContext, destinationContext, labelsContext, and %s without a value)",
						strings.Join(h.options, ", "))
				}
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

// values are the context's labels of f, in the order of names. Those of
// an inverted context name the sides of the request that f, a response,
// answers: as Cilium's, the label source then holds what
// destinationContext says of f's destination, and the other way round.
func (c Context) values(f *flow.Flow, invert bool) []string {
	var out []string
	for _, l := range c.Labels {
		side, field, _ := strings.Cut(l, "_")
		if invert {
			switch side {
			case "source":
				side = "destination"
			case "destination":
				side = "source"
			}
		}
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
	src := contextValue(c.Source, f.GetSource(), f.GetIP().GetSource())
	dst := contextValue(c.Destination, f.GetDestination(), f.GetIP().GetDestination())
	if invert {
		src, dst = dst, src
	}
	if len(c.Source) > 0 {
		out = append(out, src)
	}
	if len(c.Destination) > 0 {
		out = append(out, dst)
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

// handler is one metric of --hubble-metrics: the Prometheus metrics it
// registers, and how a flow counts in them.
type handler struct {
	families func(Spec) []family
	// count calls observe once per observation the flow makes.
	count func(f *flow.Flow, s Spec, o observe)
	// contextFirst puts the context labels before the metric's own,
	// as Cilium's drop, dns and http metrics have them.
	contextFirst bool
	// invertContext names in the context labels the sides of the
	// request that a response answers, as Cilium's httpV2.
	invertContext bool
	// options are the handler's own, given without a value.
	options []string
	// conflicts names the metric that registers the same names.
	conflicts string
}

// family is one Prometheus metric of a handler.
type family struct {
	name, help string
	labels     []string // the handler's own
	histogram  bool     // of Prometheus' default buckets; else a counter
}

// counter is the families of a handler of one counter.
func counter(name, help string, labels ...string) func(Spec) []family {
	return func(Spec) []family { return []family{{name: name, help: help, labels: labels}} }
}

// observe counts a flow in the handler's family i: an increment of v for
// a counter, an observation of v for a histogram, with the family's own
// label values.
type observe func(i int, v float64, own ...string)

// inc counts one in the handler's first family.
func (o observe) inc(own ...string) { o(0, 1, own...) }

var handlers = map[string]handler{
	"flow": {families: counter("flows_processed_total", "Total number of flows processed", "protocol", "type", "subtype", "verdict"),
		count: func(f *flow.Flow, _ Spec, o observe) {
			typ, sub := "Unknown", strconv.Itoa(int(f.GetEventType().GetType()))
			switch f.GetEventType().GetType() {
			case flows.EventTypes["drop"]:
				typ, sub = "Drop", ""
			case flows.EventTypes["trace"]:
				typ, sub = "Trace", flows.TracePointName(f.GetEventType().GetSubType())
			case flows.EventTypes["policy-verdict"]:
				typ, sub = "PolicyVerdict", ""
			case flows.EventTypeL7:
				typ, sub = "L7", l7Protocol(f)
			}
			o.inc(protocol(f), typ, sub, f.GetVerdict().String())
		}},
	// Drops are the datapath's drop events and the requests that a
	// layer-7 proxy denied: a policy verdict that denied is followed by
	// the drop, and is counted once, there.
	"drop": {families: counter("drop_total", "Number of drops", "reason", "protocol"), contextFirst: true,
		count: func(f *flow.Flow, _ Spec, o observe) {
			if t := f.GetEventType().GetType(); f.GetVerdict() == flow.Verdict_DROPPED && (t == flows.EventTypes["drop"] || t == flows.EventTypeL7) {
				o.inc(f.GetDropReasonDesc().String(), protocol(f))
			}
		}},
	"tcp": {families: counter("tcp_flags_total", "TCP flag occurrences", "flag", "family"),
		count: func(f *flow.Flow, _ Spec, o observe) {
			fl := f.GetL4().GetTCP().GetFlags()
			if fl == nil || (f.GetVerdict() != flow.Verdict_FORWARDED && f.GetVerdict() != flow.Verdict_REDIRECTED) {
				return
			}
			family := f.GetIP().GetIpVersion().String()
			if fl.GetFIN() {
				o.inc("FIN", family)
			}
			switch {
			case fl.GetSYN() && fl.GetACK():
				o.inc("SYN-ACK", family)
			case fl.GetSYN():
				o.inc("SYN", family)
			}
			if fl.GetRST() {
				o.inc("RST", family)
			}
		}},
	// A reply is not counted, as in Cilium: its destination port is the
	// client's (an HTTP response's, a DNS answer's).
	"port-distribution": {families: counter("port_distribution_total", "Numbers of packets distributed by destination port", "protocol", "port"),
		count: func(f *flow.Flow, _ Spec, o observe) {
			if (f.GetVerdict() != flow.Verdict_FORWARDED && f.GetVerdict() != flow.Verdict_REDIRECTED) || f.GetIsReply().GetValue() {
				return
			}
			if _, dst, ok := flows.Ports(f); ok {
				o.inc(l4Protocol(f), strconv.Itoa(int(dst)))
			} else if f.GetL4().GetICMPv4() != nil {
				o.inc("ICMPv4", "0")
			}
		}},
	"icmp": {families: counter("icmp_total", "Number of ICMP messages", "family", "type"),
		count: func(f *flow.Flow, _ Spec, o observe) {
			if icmp := f.GetL4().GetICMPv4(); icmp != nil {
				o.inc("IPv4", icmpType(icmp.GetType(), icmp.GetCode()))
			}
		}},
	// Layer-7 verdicts count as Cilium's: matched by l7/dns or l7/http.
	"policy": {families: counter("policy_verdicts_total", "Total number of Cilium network policy verdicts", "direction", "match", "action"),
		count: func(f *flow.Flow, _ Spec, o observe) {
			var match string
			switch f.GetEventType().GetType() {
			case flows.EventTypes["policy-verdict"]:
				if f.GetSource().GetIdentity() == uint32(identity.Host) {
					return
				}
				match = policyMatch(f)
			case flows.EventTypeL7:
				match = "l7/" + strings.ToLower(l7Protocol(f))
			default:
				return
			}
			o.inc(strings.ToLower(f.GetTrafficDirection().String()), match, strings.ToLower(f.GetVerdict().String()))
		}},
	"dns":    dnsHandler,
	"http":   httpHandler(false),
	"httpV2": httpHandler(true),
}

// protocol is the flow's protocol as Cilium's metrics name it: its L7 for
// an L7 flow, else its L4.
func protocol(f *flow.Flow) string {
	if f.GetEventType().GetType() == flows.EventTypeL7 {
		if p := l7Protocol(f); p != "" {
			return p
		}
		return "Unknown L7"
	}
	return l4Protocol(f)
}

// l4Protocol is the flow's L4 as Cilium's metrics name it.
func l4Protocol(f *flow.Flow) string {
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

// metric is a handler with its spec, registered: one function per
// family that counts a value with the family's label values.
type metric struct {
	h        handler
	spec     Spec
	families []func(v float64, labels []string)
}

// Metrics counts flows into the metrics asked for.
type Metrics struct{ metrics []metric }

// New registers specs' metrics on reg.
func New(specs []Spec, reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{}
	for _, s := range specs {
		h := handlers[s.Name]
		mt := metric{h: h, spec: s}
		for _, fam := range h.families(s) {
			labels := append(slices.Clone(fam.labels), s.Context.names()...)
			if h.contextFirst {
				labels = append(s.Context.names(), fam.labels...)
			}
			var vec prometheus.Collector
			if fam.histogram {
				hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "hubble", Name: fam.name, Help: fam.help}, labels)
				vec = hv
				mt.families = append(mt.families, func(v float64, ls []string) { hv.WithLabelValues(ls...).Observe(v) })
			} else {
				cv := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "hubble", Name: fam.name, Help: fam.help}, labels)
				vec = cv
				mt.families = append(mt.families, func(v float64, ls []string) { cv.WithLabelValues(ls...).Add(v) })
			}
			if err := reg.Register(vec); err != nil {
				return nil, fmt.Errorf("metric %s: %w", s.Name, err)
			}
		}
		m.metrics = append(m.metrics, mt)
	}
	return m, nil
}

// Process counts f.
func (m *Metrics) Process(f *flow.Flow) {
	for _, mt := range m.metrics {
		var ctx []string
		mt.h.count(f, mt.spec, func(i int, v float64, own ...string) {
			if ctx == nil {
				ctx = mt.spec.Context.values(f, mt.h.invertContext)
			}
			vals := append(slices.Clone(own), ctx...)
			if mt.h.contextFirst {
				vals = append(slices.Clone(ctx), own...)
			}
			mt.families[i](v, vals)
		})
	}
}
