package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestHTTPFilters(t *testing.T) {
	f := &flow.Flow{L7: &flow.Layer7{Record: &flow.Layer7_Http{Http: &flow.HTTP{Code: 404, Method: "GET",
		Url: "http://echo.default/api/v1/items?x=1", Headers: []*flow.HTTPHeader{{Key: "User-Agent", Value: "curl"}}}}}}
	testBuilder(t, httpFilters, []builderCase{
		{name: "code", ff: &flow.FlowFilter{HttpStatusCode: []string{"404"}}, f: f, want: true},
		{name: "code prefix", ff: &flow.FlowFilter{HttpStatusCode: []string{"2+", "40+"}}, f: f, want: true},
		{name: "other code", ff: &flow.FlowFilter{HttpStatusCode: []string{"200"}}, f: f, want: false},
		{name: "method any case", ff: &flow.FlowFilter{HttpMethod: []string{"get"}}, f: f, want: true},
		{name: "url", ff: &flow.FlowFilter{HttpUrl: []string{`echo\.default`}}, f: f, want: true},
		{name: "path is not the query", ff: &flow.FlowFilter{HttpPath: []string{"x=1"}}, f: f, want: false},
		{name: "header", ff: &flow.FlowFilter{HttpHeader: []*flow.HTTPHeader{{Key: "User-Agent", Value: "curl"}}}, f: f, want: true},
		{name: "no record", ff: &flow.FlowFilter{HttpMethod: []string{"GET"}}, f: tcpFlow(), want: false},
		{name: "with the L7 event type", ff: &flow.FlowFilter{HttpMethod: []string{"GET"},
			EventType: []*flow.EventTypeFilter{{Type: 4}, {Type: 129}}}, f: f, want: true},
		{name: "with event types of no L7", ff: &flow.FlowFilter{HttpStatusCode: []string{"2+"},
			EventType: []*flow.EventTypeFilter{{Type: 1}}}, err: "event_type"},
		{name: "bad code", ff: &flow.FlowFilter{HttpStatusCode: []string{"2xx"}}, err: "http_status_code"},
		{name: "bad path", ff: &flow.FlowFilter{HttpPath: []string{"/api/("}}, err: "http_path"},
	})
}
