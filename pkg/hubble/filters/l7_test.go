package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

// l7Flow is an HTTP response as the parser makes it of a proxy's record.
func l7Flow() *flow.Flow {
	return &flow.Flow{Verdict: flow.Verdict_FORWARDED, Type: flow.FlowType_L7, EventType: &flow.CiliumEventType{Type: 129},
		L7: &flow.Layer7{Type: flow.L7FlowType_RESPONSE, Record: &flow.Layer7_Http{Http: &flow.HTTP{Code: 404, Method: "GET",
			Url: "http://echo.default/api/v1/items?x=1", Headers: []*flow.HTTPHeader{{Key: "User-Agent", Value: "curl"}}}}}}
}

// TestL7AndOtherFields: Hubble's syntax and meaning on the fields that
// other parts fill; a flow without the field matches none of them.
func TestL7AndOtherFields(t *testing.T) {
	httpFlow := l7Flow()
	dnsFlow := &flow.Flow{Verdict: flow.Verdict_DROPPED, Type: flow.FlowType_L7, EventType: &flow.CiliumEventType{Type: 129},
		L7:               &flow.Layer7{Type: flow.L7FlowType_REQUEST, Record: &flow.Layer7_Dns{Dns: &flow.DNS{Query: "api.example.com."}}},
		DestinationNames: []string{"api.example.com"}}
	other := &flow.Flow{IP: &flow.IP{Source: "10.0.0.1", SourceXlated: "192.0.2.1", Encrypted: true},
		Source:       &flow.Endpoint{ClusterName: "east"},
		NodeLabels:   []string{"k8s:topology.kubernetes.io/zone=a"},
		IpTraceId:    &flow.IPTraceID{TraceId: 7},
		TraceContext: &flow.TraceContext{Parent: &flow.TraceParent{TraceId: "4bf92f3577b34da6a3ce929d0e0e4736"}}}
	plain := &flow.Flow{IP: &flow.IP{Source: "10.0.0.1"}, Source: &flow.Endpoint{PodName: "client"}}
	for _, tc := range []struct {
		name string
		ff   *flow.FlowFilter
		pass []*flow.Flow
	}{
		{"status code", &flow.FlowFilter{HttpStatusCode: []string{"404"}}, []*flow.Flow{httpFlow}},
		{"status prefix", &flow.FlowFilter{HttpStatusCode: []string{"4+"}}, []*flow.Flow{httpFlow}},
		{"other status", &flow.FlowFilter{HttpStatusCode: []string{"2+", "500"}}, nil},
		{"method", &flow.FlowFilter{HttpMethod: []string{"get"}}, []*flow.Flow{httpFlow}},
		{"path", &flow.FlowFilter{HttpPath: []string{"^/api/v1/"}}, []*flow.Flow{httpFlow}},
		{"path is not the query", &flow.FlowFilter{HttpPath: []string{"x=1"}}, nil},
		{"url", &flow.FlowFilter{HttpUrl: []string{"echo\\.default"}}, []*flow.Flow{httpFlow}},
		{"header", &flow.FlowFilter{HttpHeader: []*flow.HTTPHeader{{Key: "User-Agent", Value: "curl"}}}, []*flow.Flow{httpFlow}},
		{"dns query", &flow.FlowFilter{DnsQuery: []string{"example\\.com\\.$"}}, []*flow.Flow{dnsFlow}},
		{"fqdn", &flow.FlowFilter{DestinationFqdn: []string{"*.example.com"}}, []*flow.Flow{dnsFlow}},
		{"fqdn is whole", &flow.FlowFilter{DestinationFqdn: []string{"example.com"}}, nil},
		{"cluster", &flow.FlowFilter{SourceClusterName: []string{"east"}}, []*flow.Flow{other}},
		{"node labels", &flow.FlowFilter{NodeLabels: []string{"topology.kubernetes.io/zone=a"}}, []*flow.Flow{other}},
		{"ip trace", &flow.FlowFilter{IpTraceId: []uint64{7}}, []*flow.Flow{other}},
		{"trace", &flow.FlowFilter{TraceId: []string{"4bf92f3577b34da6a3ce929d0e0e4736"}}, []*flow.Flow{other}},
		{"encrypted", &flow.FlowFilter{Encrypted: []bool{true}}, []*flow.Flow{other}},
		{"unencrypted", &flow.FlowFilter{Encrypted: []bool{false}}, []*flow.Flow{plain}},
		{"http protocol", &flow.FlowFilter{Protocol: []string{"HTTP"}}, []*flow.Flow{httpFlow}},
		{"dns protocol", &flow.FlowFilter{Protocol: []string{"dns"}}, []*flow.Flow{dnsFlow}},
		{"translated source", &flow.FlowFilter{SourceIpXlated: []string{"192.0.2.0/24"}}, []*flow.Flow{other}},
		// hubble observe --type l7, with the fields of L7 flows.
		{"type l7", &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 129}}}, []*flow.Flow{httpFlow, dnsFlow}},
		{"type l7, status", &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 129}}, HttpStatusCode: []string{"4+"}},
			[]*flow.Flow{httpFlow}},
		{"denied L7", &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 129}}, Verdict: []flow.Verdict{flow.Verdict_DROPPED}},
			[]*flow.Flow{dnsFlow}},
	} {
		s, err := Compile([]*flow.FlowFilter{tc.ff}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, f := range []*flow.Flow{httpFlow, dnsFlow, other, plain} {
			want := false
			for _, p := range tc.pass {
				want = want || p == f
			}
			if got := s.Pass(f); got != want {
				t.Errorf("%s: Pass(%v) = %v, want %v", tc.name, f, got, want)
			}
		}
	}
}
