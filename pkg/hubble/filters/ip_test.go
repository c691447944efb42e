package filters

import (
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
)

func TestIPFilters(t *testing.T) {
	f := tcpFlow()
	testBuilder(t, ipFilters, []builderCase{
		{name: "address", ff: &flow.FlowFilter{SourceIp: []string{"10.0.1.5"}}, f: f, want: true},
		{name: "prefix", ff: &flow.FlowFilter{DestinationIp: []string{"10.0.2.0/24"}}, f: f, want: true},
		{name: "prefix not masked", ff: &flow.FlowFilter{DestinationIp: []string{"10.0.2.9/24"}}, f: f, want: true},
		{name: "other side", ff: &flow.FlowFilter{DestinationIp: []string{"10.0.1.5"}}, f: f, want: false},
		{name: "both sides", ff: &flow.FlowFilter{SourceIp: []string{"10.0.1.5"}, DestinationIp: []string{"10.9.0.0/16"}}, f: f, want: false},
		{name: "no IP header", ff: &flow.FlowFilter{SourceIp: []string{"0.0.0.0/0"}}, f: &flow.Flow{}, want: false},
		{name: "bad", ff: &flow.FlowFilter{DestinationIp: []string{"10.0.0.300"}}, err: "destination_ip"},
	})
	xlated := &flow.Flow{IP: &flow.IP{Source: "10.0.0.1", SourceXlated: "192.0.2.1"}}
	testBuilder(t, xlatedFilter, []builderCase{
		{name: "translated", ff: &flow.FlowFilter{SourceIpXlated: []string{"192.0.2.0/24"}}, f: xlated, want: true},
		{name: "not the source", ff: &flow.FlowFilter{SourceIpXlated: []string{"10.0.0.1"}}, f: xlated, want: false},
		{name: "bad", ff: &flow.FlowFilter{SourceIpXlated: []string{"nope"}}, err: "source_ip_xlated"},
	})
	testBuilder(t, encryptedFilter, []builderCase{
		{name: "plain", ff: &flow.FlowFilter{Encrypted: []bool{false}}, f: f, want: true},
		{name: "encrypted", ff: &flow.FlowFilter{Encrypted: []bool{true}}, f: f, want: false},
		{name: "no IP header", ff: &flow.FlowFilter{Encrypted: []bool{false}}, f: &flow.Flow{}, want: false},
	})
	testBuilder(t, ipVersionFilter, []builderCase{
		{name: "v4", ff: &flow.FlowFilter{IpVersion: []flow.IPVersion{flow.IPVersion_IPv4}}, f: f, want: true},
		{name: "v6", ff: &flow.FlowFilter{IpVersion: []flow.IPVersion{flow.IPVersion_IPv6}}, f: f, want: false},
		{name: "no IP header", ff: &flow.FlowFilter{IpVersion: []flow.IPVersion{flow.IPVersion_IP_NOT_USED}}, f: &flow.Flow{}, want: false},
	})
}
