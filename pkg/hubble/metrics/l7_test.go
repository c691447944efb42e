package metrics

import (
	"strings"
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// l7Flow is an L7 flow of the client x/a and the server y/web-0, as the
// parser makes of the proxy's records: a request from the client, or a
// response to it.
func l7Flow(verdict flow.Verdict, typ flow.L7FlowType, l7 *flow.Layer7) *flow.Flow {
	client := &flow.Endpoint{Namespace: "x", PodName: "a", Identity: 300, Labels: []string{"k8s:app=client"}}
	server := &flow.Endpoint{Namespace: "y", PodName: "web-0", Identity: 400, Labels: []string{"k8s:app=web"}}
	f := &flow.Flow{Verdict: verdict, Type: flow.FlowType_L7, EventType: &flow.CiliumEventType{Type: 129},
		TrafficDirection: flow.TrafficDirection_EGRESS, IsReply: wrapperspb.Bool(false),
		IP:     &flow.IP{Source: "10.0.1.5", Destination: "10.0.2.7", IpVersion: flow.IPVersion_IPv4},
		L4:     &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: 80}}},
		Source: client, Destination: server, L7: l7}
	l7.Type = typ
	if typ == flow.L7FlowType_RESPONSE {
		f.IsReply = wrapperspb.Bool(true)
		f.Source, f.Destination = server, client
		f.IP.Source, f.IP.Destination = f.IP.Destination, f.IP.Source
		f.L4 = &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 80, DestinationPort: 40000}}}
	}
	return f
}

func dnsL7(d *flow.DNS) *flow.Layer7 { return &flow.Layer7{Record: &flow.Layer7_Dns{Dns: d}} }

func httpL7(h *flow.HTTP, latencyNs uint64) *flow.Layer7 {
	return &flow.Layer7{Record: &flow.Layer7_Http{Http: h}, LatencyNs: latencyNs}
}

func newMetrics(t *testing.T, spec string) (*Metrics, *prometheus.Registry) {
	t.Helper()
	specs, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := New(specs, reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestDNSMetricAsCilium(t *testing.T) {
	m, reg := newMetrics(t, "dns:query;ignoreaaaa;sourceContext=namespace")
	q := func(name string, qtypes ...string) *flow.DNS {
		return &flow.DNS{Query: name, Qtypes: qtypes, ObservationSource: "proxy"}
	}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, dnsL7(q("api.example.com.", "A"))))
	answer := q("api.example.com.", "A")
	answer.Ips, answer.Rrtypes = []string{"192.0.2.10", "192.0.2.11"}, []string{"CNAME", "A"}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_RESPONSE, dnsL7(answer)))
	nx := q("nx.example.com.", "A")
	nx.Rcode = 3
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_RESPONSE, dnsL7(nx)))
	m.Process(l7Flow(flow.Verdict_DROPPED, flow.L7FlowType_REQUEST, dnsL7(q("evil.example.org.", "A"))))
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, dnsL7(q("api.example.com.", "AAAA"))))
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, httpL7(&flow.HTTP{Method: "GET"}, 0)))

	want := `
# HELP hubble_dns_queries_total Number of DNS queries observed
# TYPE hubble_dns_queries_total counter
hubble_dns_queries_total{ips_returned="0",qtypes="A",query="api.example.com.",rcode="",source="x"} 1
hubble_dns_queries_total{ips_returned="0",qtypes="A",query="evil.example.org.",rcode="Policy denied",source="x"} 1
# HELP hubble_dns_response_types_total Number of DNS response types observed
# TYPE hubble_dns_response_types_total counter
hubble_dns_response_types_total{qtypes="A",query="api.example.com.",source="y",type="A"} 1
hubble_dns_response_types_total{qtypes="A",query="api.example.com.",source="y",type="CNAME"} 1
# HELP hubble_dns_responses_total Number of DNS responses observed
# TYPE hubble_dns_responses_total counter
hubble_dns_responses_total{ips_returned="0",qtypes="A",query="nx.example.com.",rcode="Non-Existent Domain",source="y"} 1
hubble_dns_responses_total{ips_returned="2",qtypes="A",query="api.example.com.",rcode="No Error",source="y"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// histogram is a histogram's samples of the label value: their count and
// sum.
func histogram(t *testing.T, reg *prometheus.Registry, name, label, value string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// TestHTTPMetricAsCilium: requests counted when they come, responses by
// status with their latency; the reporter is the client for egress.
func TestHTTPMetricAsCilium(t *testing.T) {
	m, reg := newMetrics(t, "http:sourceContext=pod;labelsContext=destination_namespace")
	get := &flow.HTTP{Method: "GET", Url: "http://web/", Protocol: "HTTP/1.1"}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, httpL7(get, 0)))
	ok := &flow.HTTP{Code: 200, Method: "GET", Url: "http://web/", Protocol: "HTTP/1.1"}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_RESPONSE, httpL7(ok, 12_500_000)))
	put := &flow.HTTP{Method: "PUT", Url: "http://web/private", Protocol: "HTTP/1.1"}
	m.Process(l7Flow(flow.Verdict_DROPPED, flow.L7FlowType_REQUEST, httpL7(put, 0)))
	denied := &flow.HTTP{Code: 403, Method: "PUT", Url: "http://web/private", Protocol: "HTTP/1.1"}
	in := l7Flow(flow.Verdict_DROPPED, flow.L7FlowType_RESPONSE, httpL7(denied, 20_000))
	in.TrafficDirection = flow.TrafficDirection_INGRESS
	m.Process(in)
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, dnsL7(&flow.DNS{Query: "a."})))

	want := `
# HELP hubble_http_requests_total Count of HTTP requests
# TYPE hubble_http_requests_total counter
hubble_http_requests_total{destination_namespace="y",method="GET",protocol="HTTP/1.1",reporter="client",source="x/a"} 1
hubble_http_requests_total{destination_namespace="y",method="PUT",protocol="HTTP/1.1",reporter="client",source="x/a"} 1
# HELP hubble_http_responses_total Count of HTTP responses
# TYPE hubble_http_responses_total counter
hubble_http_responses_total{destination_namespace="x",method="GET",protocol="HTTP/1.1",reporter="client",source="y/web-0",status="200"} 1
hubble_http_responses_total{destination_namespace="x",method="PUT",protocol="HTTP/1.1",reporter="server",source="y/web-0",status="403"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hubble_http_requests_total", "hubble_http_responses_total"); err != nil {
		t.Error(err)
	}
	if n, sum := histogram(t, reg, "hubble_http_request_duration_seconds", "method", "GET"); n != 1 || sum != 0.0125 {
		t.Errorf("GET's durations: %d, sum %g; want one of 0.0125s", n, sum)
	}
}

// TestHTTPV2MetricAsCilium: responses only, their requests counted by
// status, with the context of the request's sides.
func TestHTTPV2MetricAsCilium(t *testing.T) {
	m, reg := newMetrics(t, "httpV2:sourceContext=pod;destinationContext=namespace;labelsContext=source_pod,traffic_direction")
	get := &flow.HTTP{Method: "GET", Url: "http://web/", Protocol: "HTTP/1.1"}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, httpL7(get, 0)))
	ok := &flow.HTTP{Code: 200, Method: "GET", Url: "http://web/", Protocol: "HTTP/1.1"}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_RESPONSE, httpL7(ok, 2_000_000)))

	// Cilium's inversion: source is what destinationContext says of the
	// response's destination (the client), and the other way round.
	want := `
# HELP hubble_http_requests_total Count of HTTP requests
# TYPE hubble_http_requests_total counter
hubble_http_requests_total{destination="y/web-0",method="GET",protocol="HTTP/1.1",reporter="client",source="x",source_pod="a",status="200",traffic_direction="egress"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hubble_http_requests_total", "hubble_http_responses_total"); err != nil {
		t.Error(err)
	}
	if n, sum := histogram(t, reg, "hubble_http_request_duration_seconds", "reporter", "client"); n != 1 || sum != 0.002 {
		t.Errorf("durations: %d, sum %g; want one of 0.002s", n, sum)
	}
}

// TestL3L4MetricsCountL7Flows: flow, drop, policy and port-distribution
// count L7 flows as Cilium's.
func TestL3L4MetricsCountL7Flows(t *testing.T) {
	m, reg := newMetrics(t, "flow drop policy port-distribution")
	get := &flow.HTTP{Method: "GET", Url: "http://web/", Protocol: "HTTP/1.1"}
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_REQUEST, httpL7(get, 0)))
	m.Process(l7Flow(flow.Verdict_FORWARDED, flow.L7FlowType_RESPONSE, httpL7(&flow.HTTP{Code: 200, Method: "GET"}, 1000)))
	m.Process(l7Flow(flow.Verdict_DROPPED, flow.L7FlowType_REQUEST, httpL7(&flow.HTTP{Method: "PUT"}, 0)))
	m.Process(l7Flow(flow.Verdict_DROPPED, flow.L7FlowType_REQUEST, dnsL7(&flow.DNS{Query: "evil.example.org."})))

	want := `
# HELP hubble_drop_total Number of drops
# TYPE hubble_drop_total counter
hubble_drop_total{protocol="DNS",reason="DROP_REASON_UNKNOWN"} 1
hubble_drop_total{protocol="HTTP",reason="DROP_REASON_UNKNOWN"} 1
# HELP hubble_flows_processed_total Total number of flows processed
# TYPE hubble_flows_processed_total counter
hubble_flows_processed_total{protocol="DNS",subtype="DNS",type="L7",verdict="DROPPED"} 1
hubble_flows_processed_total{protocol="HTTP",subtype="HTTP",type="L7",verdict="DROPPED"} 1
hubble_flows_processed_total{protocol="HTTP",subtype="HTTP",type="L7",verdict="FORWARDED"} 2
# HELP hubble_policy_verdicts_total Total number of Cilium network policy verdicts
# TYPE hubble_policy_verdicts_total counter
hubble_policy_verdicts_total{action="dropped",direction="egress",match="l7/dns"} 1
hubble_policy_verdicts_total{action="dropped",direction="egress",match="l7/http"} 1
hubble_policy_verdicts_total{action="forwarded",direction="egress",match="l7/http"} 2
# HELP hubble_port_distribution_total Numbers of packets distributed by destination port
# TYPE hubble_port_distribution_total counter
hubble_port_distribution_total{port="80",protocol="TCP"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
