package flows

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

// L7Summary says what Cilium's parser says of each kind of record.
func TestL7Summary(t *testing.T) {
	get := &flow.HTTP{Method: "GET", Url: "http://web/index.html", Protocol: "HTTP/1.1"}
	ok := &flow.HTTP{Method: "GET", Url: "http://web/index.html", Protocol: "HTTP/1.1", Code: 200}
	for _, tc := range []struct {
		l7   *flow.Layer7
		want string
	}{
		{&flow.Layer7{Type: flow.L7FlowType_REQUEST, Record: &flow.Layer7_Http{Http: get}}, "HTTP/1.1 GET http://web/index.html"},
		{&flow.Layer7{Type: flow.L7FlowType_RESPONSE, LatencyNs: 12_500_000, Record: &flow.Layer7_Http{Http: ok}},
			"HTTP/1.1 200 12ms (GET http://web/index.html)"},
		{&flow.Layer7{Type: flow.L7FlowType_REQUEST, Record: &flow.Layer7_Dns{Dns: &flow.DNS{Query: "world.example.", Qtypes: []string{"A"}}}},
			"DNS Query world.example. A"},
		{&flow.Layer7{Type: flow.L7FlowType_RESPONSE, Record: &flow.Layer7_Dns{Dns: &flow.DNS{Query: "world.example.", Qtypes: []string{"A"},
			Ips: []string{"192.0.2.10", "192.0.2.11"}, Cnames: []string{"edge.example."}, Ttl: 30}}},
			`DNS Answer "192.0.2.10,192.0.2.11" CNAMEs: "edge.example." TTL: 30 (Proxy world.example. A)`},
		{&flow.Layer7{Type: flow.L7FlowType_RESPONSE, Record: &flow.Layer7_Dns{Dns: &flow.DNS{Query: "nx.example.com.",
			Qtypes: []string{"A", "AAAA"}, Rcode: 3}}}, "DNS Answer RCode: Non-Existent Domain TTL: 0 (Proxy nx.example.com. A,AAAA)"},
		{&flow.Layer7{Type: flow.L7FlowType_REQUEST}, ""},
	} {
		if got := L7Summary(tc.l7); got != tc.want {
			t.Errorf("L7Summary(%v) = %q, want %q", tc.l7, got, tc.want)
		}
	}
}
