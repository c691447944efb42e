package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestDNSFilters(t *testing.T) {
	f := &flow.Flow{L7: &flow.Layer7{Record: &flow.Layer7_Dns{Dns: &flow.DNS{Query: "api.example.com."}}},
		DestinationNames: []string{"api.example.com"}}
	testBuilder(t, dnsFilters, []builderCase{
		{name: "query", ff: &flow.FlowFilter{DnsQuery: []string{`example\.com\.$`}}, f: f, want: true},
		{name: "no record", ff: &flow.FlowFilter{DnsQuery: []string{"."}}, f: tcpFlow(), want: false},
		{name: "fqdn wildcard", ff: &flow.FlowFilter{DestinationFqdn: []string{"*.example.com"}}, f: f, want: true},
		{name: "a pattern's case and dot", ff: &flow.FlowFilter{DestinationFqdn: []string{" API.Example.COM. "}}, f: f, want: true},
		{name: "names as flows have them", ff: &flow.FlowFilter{DestinationFqdn: []string{"api.example.com"}},
			f: &flow.Flow{DestinationNames: []string{"API.example.com."}}, want: false},
		{name: "a star spans labels", ff: &flow.FlowFilter{DestinationFqdn: []string{"api*"}}, f: f, want: true},
		{name: "fqdn is whole", ff: &flow.FlowFilter{DestinationFqdn: []string{"example.com"}}, f: f, want: false},
		{name: "a star is no underscore", ff: &flow.FlowFilter{DestinationFqdn: []string{"*.example.com"}},
			f: &flow.Flow{DestinationNames: []string{"_http._tcp.example.com"}}, want: false},
		{name: "an underscore written", ff: &flow.FlowFilter{DestinationFqdn: []string{"_http._tcp.*"}},
			f: &flow.Flow{DestinationNames: []string{"_http._tcp.example.com"}}, want: true},
		{name: "fqdn is no query", ff: &flow.FlowFilter{DestinationFqdn: []string{"api.example.com"}},
			f: &flow.Flow{L7: f.GetL7()}, want: false},
		{name: "source has none", ff: &flow.FlowFilter{SourceFqdn: []string{"*"}}, f: f, want: false},
		{name: "bad query", ff: &flow.FlowFilter{DnsQuery: []string{"("}}, err: "dns_query"},
		{name: "bad fqdn", ff: &flow.FlowFilter{SourceFqdn: []string{"example.com/x"}}, err: "source_fqdn"},
		{name: "two trailing dots", ff: &flow.FlowFilter{DestinationFqdn: []string{"example.com.."}}, err: "destination_fqdn"},
		{name: "empty fqdn", ff: &flow.FlowFilter{DestinationFqdn: []string{" . "}}, err: "destination_fqdn"},
	})
}
