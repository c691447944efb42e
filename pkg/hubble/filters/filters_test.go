package filters

import (
	"strings"
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func tcpFlow() *flow.Flow {
	return &flow.Flow{
		Uuid:     "u1",
		Verdict:  flow.Verdict_DROPPED,
		NodeName: "node-1",
		IP:       &flow.IP{Source: "10.0.1.5", Destination: "10.0.2.7", IpVersion: flow.IPVersion_IPv4},
		L4: &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: 80,
			Flags: &flow.TCPFlags{SYN: true}}}},
		Source: &flow.Endpoint{Identity: 300, Namespace: "x", PodName: "client-abc",
			Labels: []string{"k8s:app=client", "k8s:io.kubernetes.pod.namespace=x"}},
		Destination:        &flow.Endpoint{Identity: 400, Namespace: "y", PodName: "server-0", Labels: []string{"k8s:app=server", "k8s:tier=web"}},
		DestinationService: &flow.Service{Name: "web", Namespace: "y"},
		TrafficDirection:   flow.TrafficDirection_INGRESS,
		DropReasonDesc:     flow.DropReason_POLICY_DENIED,
		EventType:          &flow.CiliumEventType{Type: 1, SubType: 133},
		Interface:          &flow.NetworkInterface{Index: 7},
	}
}

func TestFilterFields(t *testing.T) {
	f := tcpFlow()
	for _, tc := range []struct {
		name string
		ff   *flow.FlowFilter
		want bool
	}{
		{"empty filter", &flow.FlowFilter{}, true},
		{"uuid", &flow.FlowFilter{Uuid: []string{"u2", "u1"}}, true},
		{"source ip", &flow.FlowFilter{SourceIp: []string{"10.0.1.5"}}, true},
		{"source prefix", &flow.FlowFilter{SourceIp: []string{"10.0.1.0/24"}}, true},
		{"other destination prefix", &flow.FlowFilter{DestinationIp: []string{"10.0.1.0/24"}}, false},
		{"source pod prefix", &flow.FlowFilter{SourcePod: []string{"x/client"}}, true},
		{"source namespace", &flow.FlowFilter{SourcePod: []string{"x/"}}, true},
		{"bare pod is in default", &flow.FlowFilter{SourcePod: []string{"client"}}, false},
		{"any namespace", &flow.FlowFilter{DestinationPod: []string{"/server"}}, true},
		{"destination service", &flow.FlowFilter{DestinationService: []string{"y/web"}}, true},
		{"source service of none", &flow.FlowFilter{SourceService: []string{"y/"}}, false},
		{"label", &flow.FlowFilter{SourceLabel: []string{"app=client"}}, true},
		{"label with source", &flow.FlowFilter{SourceLabel: []string{"k8s:app=client"}}, true},
		{"label of another source", &flow.FlowFilter{SourceLabel: []string{"reserved:app=client"}}, false},
		{"label terms all", &flow.FlowFilter{DestinationLabel: []string{"app=server,tier in (web, db)"}}, true},
		{"label term fails", &flow.FlowFilter{DestinationLabel: []string{"app=server,!tier"}}, false},
		{"label values any", &flow.FlowFilter{DestinationLabel: []string{"app=x", "tier notin (db)"}}, true},
		{"verdict", &flow.FlowFilter{Verdict: []flow.Verdict{flow.Verdict_FORWARDED, flow.Verdict_DROPPED}}, true},
		{"other verdict", &flow.FlowFilter{Verdict: []flow.Verdict{flow.Verdict_FORWARDED}}, false},
		{"drop reason", &flow.FlowFilter{DropReasonDesc: []flow.DropReason{flow.DropReason_POLICY_DENIED}}, true},
		{"direction", &flow.FlowFilter{TrafficDirection: []flow.TrafficDirection{flow.TrafficDirection_EGRESS}}, false},
		{"event type", &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 1}}}, true},
		{"event sub type", &flow.FlowFilter{EventType: []*flow.EventTypeFilter{{Type: 1, MatchSubType: true, SubType: 181}}}, false},
		{"protocol", &flow.FlowFilter{Protocol: []string{"UDP", "tcp"}}, true},
		{"other protocol", &flow.FlowFilter{Protocol: []string{"icmp"}}, false},
		{"destination port", &flow.FlowFilter{DestinationPort: []string{"80"}}, true},
		{"source port", &flow.FlowFilter{SourcePort: []string{"80"}}, false},
		{"identities", &flow.FlowFilter{SourceIdentity: []uint32{300}, DestinationIdentity: []uint32{400}}, true},
		{"one field fails, the filter fails", &flow.FlowFilter{SourceIdentity: []uint32{300}, DestinationIdentity: []uint32{1}}, false},
		{"tcp flags", &flow.FlowFilter{TcpFlags: []*flow.TCPFlags{{SYN: true, ACK: true}, {SYN: true}}}, true},
		{"tcp flags missing", &flow.FlowFilter{TcpFlags: []*flow.TCPFlags{{SYN: true, ACK: true}}}, false},
		{"drop of unknown direction is no reply", &flow.FlowFilter{Reply: []bool{false}}, true},
		{"node pattern", &flow.FlowFilter{NodeName: []string{"node-*"}}, true},
		{"node pattern with cluster", &flow.FlowFilter{NodeName: []string{"default/node-2"}}, false},
		{"interface", &flow.FlowFilter{Interface: []*flow.NetworkInterface{{Index: 7}}}, true},
		{"ip version", &flow.FlowFilter{IpVersion: []flow.IPVersion{flow.IPVersion_IPv6}}, false},
	} {
		s, err := Compile([]*flow.FlowFilter{tc.ff}, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := s.Pass(f); got != tc.want {
			t.Errorf("%s: whitelist passes %v, want %v", tc.name, got, tc.want)
		}
		s, _ = Compile(nil, []*flow.FlowFilter{tc.ff})
		if got := s.Pass(f); got == tc.want {
			t.Errorf("%s: blacklist passes %v, want %v", tc.name, got, !tc.want)
		}
	}
}

func TestWhitelistsAddUpBlacklistsWin(t *testing.T) {
	f := tcpFlow()
	no, yes := &flow.FlowFilter{Verdict: []flow.Verdict{flow.Verdict_FORWARDED}}, &flow.FlowFilter{SourcePod: []string{"x/"}}
	for _, tc := range []struct {
		name         string
		white, black []*flow.FlowFilter
		want         bool
	}{
		{"no filters", nil, nil, true},
		{"any whitelist filter", []*flow.FlowFilter{no, yes}, nil, true},
		{"no whitelist filter", []*flow.FlowFilter{no}, nil, false},
		{"a blacklist filter matches", []*flow.FlowFilter{yes}, []*flow.FlowFilter{no, yes}, false},
	} {
		s, err := Compile(tc.white, tc.black)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Pass(f); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	reply := &flow.Flow{Verdict: flow.Verdict_FORWARDED, IsReply: wrapperspb.Bool(true)}
	s, _ := Compile([]*flow.FlowFilter{{Reply: []bool{true}}}, nil)
	if !s.Pass(reply) || s.Pass(&flow.Flow{Verdict: flow.Verdict_FORWARDED}) {
		t.Error("reply filter: a reply must pass, a forwarded flow of unknown direction must not")
	}
}

func TestBadFiltersNameTheField(t *testing.T) {
	for _, tc := range []struct {
		ff   *flow.FlowFilter
		want string
	}{
		{&flow.FlowFilter{HttpStatusCode: []string{"2xx"}}, "http_status_code"},
		{&flow.FlowFilter{HttpPath: []string{"/api/("}}, "http_path"},
		{&flow.FlowFilter{DnsQuery: []string{"*.example.com"}}, "dns_query"},
		{&flow.FlowFilter{SourceFqdn: []string{"example.com/x"}}, "source_fqdn"},
		{&flow.FlowFilter{DestinationClusterName: []string{""}}, "destination_cluster_name"},
		{&flow.FlowFilter{NodeLabels: []string{"zone in x"}}, "node_labels"},
		{&flow.FlowFilter{SourceIpXlated: []string{"nope"}}, "source_ip_xlated"},
		{&flow.FlowFilter{Experimental: &flow.FlowFilter_Experimental{CelExpression: []string{"1"}}}, "cel_expression"},
		{&flow.FlowFilter{SourceIp: []string{"10.0.0.300"}}, "source_ip"},
		{&flow.FlowFilter{DestinationPort: []string{"http"}}, "destination_port"},
		{&flow.FlowFilter{Protocol: []string{"gre"}}, "protocol"},
		{&flow.FlowFilter{SourcePod: []string{""}}, "source_pod"},
		{&flow.FlowFilter{SourceLabel: []string{"app in x"}}, "source_label"},
		{&flow.FlowFilter{NodeName: []string{"node-["}}, "node_name"},
	} {
		_, err := Compile(nil, []*flow.FlowFilter{{}, tc.ff})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "blacklist[1]") {
			t.Errorf("%v: error %v, want one naming blacklist[1] and %s", tc.ff, err, tc.want)
		}
	}
}
