package metrics

import (
	"strings"
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestParseNamesWhatIsWrong(t *testing.T) {
	specs, err := Parse("flow  drop:sourceContext=pod|identity;destinationContext=namespace policy:labelsContext=traffic_direction,source_namespace")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[1].Context.Source[1] != "identity" || specs[1].Context.Destination[0] != "namespace" ||
		strings.Join(specs[2].Context.Labels, ",") != "source_namespace,traffic_direction" {
		t.Errorf("specs %+v", specs)
	}
	for in, want := range map[string]string{
		"kafka":                       `metric "kafka"`,
		"http httpV2":                 `"http" and "httpV2"`,
		"dns:query=yes":               "option query",
		"flow flow":                   "given twice",
		"drop:sourceContext=nodes":    `"nodes"`,
		"drop:labelsContext=src_ip":   `"src_ip"`,
		"drop:sourceContext":          "want name=value",
		"tcp:exemplars=true":          "option exemplars",
		"icmp:destinationContext=ip|": `""`,
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", in, err, want)
		}
	}
}

func tcpFlow(verdict flow.Verdict, flags *flow.TCPFlags) *flow.Flow {
	return &flow.Flow{Verdict: verdict, EventType: &flow.CiliumEventType{Type: 4, SubType: 0},
		IP:     &flow.IP{Source: "10.0.1.5", Destination: "10.0.2.7", IpVersion: flow.IPVersion_IPv4},
		L4:     &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: 8080, Flags: flags}}},
		Source: &flow.Endpoint{Namespace: "x", PodName: "a", Identity: 300, Labels: []string{"k8s:app=web"}},
		Destination: &flow.Endpoint{Namespace: "y", PodName: "b", Identity: 400,
			Workloads: []*flow.Workload{{Name: "db", Kind: "Deployment"}}}}
}

func TestMetricsCountAsCilium(t *testing.T) {
	specs, err := Parse("flow tcp port-distribution icmp drop:sourceContext=pod;destinationContext=workload|namespace " +
		"policy:labelsContext=source_app,destination_namespace,traffic_direction")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := New(specs, reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Process(tcpFlow(flow.Verdict_FORWARDED, &flow.TCPFlags{SYN: true}))
	m.Process(tcpFlow(flow.Verdict_FORWARDED, &flow.TCPFlags{SYN: true, ACK: true}))
	m.Process(tcpFlow(flow.Verdict_FORWARDED, &flow.TCPFlags{FIN: true, ACK: true}))
	drop := tcpFlow(flow.Verdict_DROPPED, &flow.TCPFlags{SYN: true})
	drop.EventType, drop.DropReasonDesc = &flow.CiliumEventType{Type: 1, SubType: 133}, flow.DropReason_POLICY_DENIED
	m.Process(drop)
	verdict := tcpFlow(flow.Verdict_DROPPED, &flow.TCPFlags{SYN: true})
	verdict.EventType, verdict.TrafficDirection = &flow.CiliumEventType{Type: 5}, flow.TrafficDirection_INGRESS
	m.Process(verdict)
	m.Process(&flow.Flow{Verdict: flow.Verdict_FORWARDED, EventType: &flow.CiliumEventType{Type: 4, SubType: 3},
		IP: &flow.IP{IpVersion: flow.IPVersion_IPv4}, L4: &flow.Layer4{Protocol: &flow.Layer4_ICMPv4{ICMPv4: &flow.ICMPv4{Type: 8}}}})

	want := `
# HELP hubble_drop_total Number of drops
# TYPE hubble_drop_total counter
hubble_drop_total{destination="y/db",protocol="TCP",reason="POLICY_DENIED",source="x/a"} 1
# HELP hubble_flows_processed_total Total number of flows processed
# TYPE hubble_flows_processed_total counter
hubble_flows_processed_total{protocol="ICMPv4",subtype="to-stack",type="Trace",verdict="FORWARDED"} 1
hubble_flows_processed_total{protocol="TCP",subtype="",type="Drop",verdict="DROPPED"} 1
hubble_flows_processed_total{protocol="TCP",subtype="",type="PolicyVerdict",verdict="DROPPED"} 1
hubble_flows_processed_total{protocol="TCP",subtype="to-endpoint",type="Trace",verdict="FORWARDED"} 3
# HELP hubble_icmp_total Number of ICMP messages
# TYPE hubble_icmp_total counter
hubble_icmp_total{family="IPv4",type="EchoRequest"} 1
# HELP hubble_policy_verdicts_total Total number of Cilium network policy verdicts
# TYPE hubble_policy_verdicts_total counter
hubble_policy_verdicts_total{action="dropped",destination_namespace="y",direction="ingress",match="none",source_app="web",traffic_direction="ingress"} 1
# HELP hubble_port_distribution_total Numbers of packets distributed by destination port
# TYPE hubble_port_distribution_total counter
hubble_port_distribution_total{port="0",protocol="ICMPv4"} 1
hubble_port_distribution_total{port="8080",protocol="TCP"} 3
# HELP hubble_tcp_flags_total TCP flag occurrences
# TYPE hubble_tcp_flags_total counter
hubble_tcp_flags_total{family="IPv4",flag="FIN"} 1
hubble_tcp_flags_total{family="IPv4",flag="SYN"} 1
hubble_tcp_flags_total{family="IPv4",flag="SYN-ACK"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
