package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
)

// l7Protocol is an L7 flow's protocol as Cilium's metrics name it: DNS,
// HTTP, or empty.
func l7Protocol(f *flow.Flow) string {
	switch {
	case f.GetL7().GetDns() != nil:
		return "DNS"
	case f.GetL7().GetHttp() != nil:
		return "HTTP"
	}
	return ""
}

// dnsHandler counts DNS queries, answers and the types of the answers'
// records, as Cilium's dns metric: options query (the name asked as a
// label) and ignoreAAAA (queries of AAAA alone left out). A denied query
// counts with the rcode "Policy denied".
var dnsHandler = handler{
	families: func(s Spec) []family {
		withQuery := func(labels ...string) []string {
			if s.has("query") {
				return append(labels, "query")
			}
			return labels
		}
		return []family{
			{name: "dns_queries_total", help: "Number of DNS queries observed", labels: withQuery("rcode", "qtypes", "ips_returned")},
			{name: "dns_responses_total", help: "Number of DNS responses observed", labels: withQuery("rcode", "qtypes", "ips_returned")},
			{name: "dns_response_types_total", help: "Number of DNS response types observed", labels: withQuery("type", "qtypes")},
		}
	},
	contextFirst: true,
	options:      []string{"query", "ignoreAAAA"},
	count: func(f *flow.Flow, s Spec, o observe) {
		d := f.GetL7().GetDns()
		if d == nil || (s.has("ignoreAAAA") && len(d.GetQtypes()) == 1 && d.GetQtypes()[0] == "AAAA") {
			return
		}
		withQuery := func(labels ...string) []string {
			if s.has("query") {
				return append(labels, d.GetQuery())
			}
			return labels
		}
		qtypes, ips := strings.Join(d.GetQtypes(), ","), strconv.Itoa(len(d.GetIps()))
		switch {
		case f.GetVerdict() == flow.Verdict_DROPPED:
			o(0, 1, withQuery("Policy denied", qtypes, ips)...)
		case !f.GetIsReply().GetValue():
			o(0, 1, withQuery("", qtypes, ips)...)
		default:
			o(1, 1, withQuery(dnsRcodeNames[d.GetRcode()], qtypes, ips)...)
			for _, t := range d.GetRrtypes() {
				o(2, 1, withQuery(t, qtypes)...)
			}
		}
	},
}

// dnsRcodeNames are the response codes as Cilium's dns metric names
// them; a code not listed has the empty name.
var dnsRcodeNames = map[uint32]string{
	0: "No Error", 1: "Format Error", 2: "Server Failure", 3: "Non-Existent Domain", 4: "Not Implemented",
	5: "Query Refused", 6: "Name Exists when it should not", 7: "RR Set Exists when it should not",
	8: "RR Set that should exist does not", 9: "Not Authorized", 10: "Name not contained in zone",
	11: "DSO-TYPE Not Implemented", 16: "Bad OPT Version", 17: "Key not recognized", 18: "Signature out of time window",
	19: "Bad TKEY Mode", 20: "Duplicate key name", 21: "Algorithm not supported", 22: "Bad Truncation",
	23: "Bad/missing Server Cookie",
}

// httpHandler counts HTTP requests and responses and the responses'
// latency, as Cilium's http metric, or as its httpV2 (v2): responses
// only, their requests counted by status, with the context of the
// request's sides. The reporter is the client for egress, the server
// for ingress.
func httpHandler(v2 bool) handler {
	duration := family{name: "http_request_duration_seconds", help: "Quantiles of HTTP request duration in seconds",
		labels: []string{"method", "reporter"}, histogram: true}
	if v2 {
		return handler{
			families: func(Spec) []family {
				return []family{{name: "http_requests_total", help: "Count of HTTP requests",
					labels: []string{"method", "protocol", "status", "reporter"}}, duration}
			},
			contextFirst: true, invertContext: true, conflicts: "http",
			count: func(f *flow.Flow, _ Spec, o observe) {
				h := f.GetL7().GetHttp()
				if h == nil || f.GetL7().GetType() != flow.L7FlowType_RESPONSE {
					return
				}
				o(0, 1, h.GetMethod(), h.GetProtocol(), strconv.Itoa(int(h.GetCode())), reporter(f))
				o(1, latency(f), h.GetMethod(), reporter(f))
			},
		}
	}
	return handler{
		families: func(Spec) []family {
			return []family{
				{name: "http_requests_total", help: "Count of HTTP requests", labels: []string{"method", "protocol", "reporter"}},
				{name: "http_responses_total", help: "Count of HTTP responses", labels: []string{"method", "protocol", "status", "reporter"}},
				duration,
			}
		},
		contextFirst: true, conflicts: "httpV2",
		count: func(f *flow.Flow, _ Spec, o observe) {
			h := f.GetL7().GetHttp()
			if h == nil {
				return
			}
			switch f.GetL7().GetType() {
			case flow.L7FlowType_REQUEST:
				o(0, 1, h.GetMethod(), h.GetProtocol(), reporter(f))
			case flow.L7FlowType_RESPONSE:
				o(1, 1, h.GetMethod(), h.GetProtocol(), strconv.Itoa(int(h.GetCode())), reporter(f))
				o(2, latency(f), h.GetMethod(), reporter(f))
			}
		},
	}
}

func reporter(f *flow.Flow) string {
	switch f.GetTrafficDirection() {
	case flow.TrafficDirection_EGRESS:
		return "client"
	case flow.TrafficDirection_INGRESS:
		return "server"
	}
	return "unknown"
}

// latency is a response's, in seconds.
func latency(f *flow.Flow) float64 {
	return float64(f.GetL7().GetLatencyNs()) / float64(time.Second)
}
