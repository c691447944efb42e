package fieldmask

import (
	"strings"
	"testing"

	"github.com/cilium/cilium/api/v1/flow"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func tcpFlow() *flow.Flow {
	return &flow.Flow{
		Time:     &timestamppb.Timestamp{Seconds: 1_700_000_000, Nanos: 5},
		NodeName: "node-a",
		Verdict:  flow.Verdict_FORWARDED,
		IP:       &flow.IP{Source: "10.0.0.1", Destination: "10.0.1.2", IpVersion: flow.IPVersion_IPv4},
		L4: &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: 80,
			Flags: &flow.TCPFlags{SYN: true}}}},
		Source: &flow.Endpoint{ID: 7, Identity: 1234, Namespace: "default", PodName: "client",
			Labels: []string{"k8s:app=client", "k8s:io.kubernetes.pod.namespace=default"}},
		Destination:      &flow.Endpoint{Identity: 2, Labels: []string{"reserved:world"}},
		EgressAllowedBy:  []*flow.Policy{{Name: "allow-web", Namespace: "default", Kind: "CiliumNetworkPolicy"}},
		TrafficDirection: flow.TrafficDirection_EGRESS,
		Summary:          "TCP Flags: SYN",
	}
}

func TestApply(t *testing.T) {
	udp := &flow.Flow{L4: &flow.Layer4{Protocol: &flow.Layer4_UDP{UDP: &flow.UDP{SourcePort: 5353, DestinationPort: 53}}}}
	for _, tc := range []struct {
		name  string
		paths []string
		in    *flow.Flow
		want  *flow.Flow
	}{
		{name: "top-level scalars and messages", paths: []string{"time", "verdict", "IP", "Summary"}, in: tcpFlow(),
			want: &flow.Flow{Time: tcpFlow().Time, Verdict: flow.Verdict_FORWARDED,
				IP: &flow.IP{Source: "10.0.0.1", Destination: "10.0.1.2", IpVersion: flow.IPVersion_IPv4}, Summary: "TCP Flags: SYN"}},
		{name: "nested fields", paths: []string{"source.pod_name", "source.namespace", "destination.identity"}, in: tcpFlow(),
			want: &flow.Flow{Source: &flow.Endpoint{Namespace: "default", PodName: "client"}, Destination: &flow.Endpoint{Identity: 2}}},
		{name: "a repeated field is kept whole", paths: []string{"source.labels", "egress_allowed_by"}, in: tcpFlow(),
			want: &flow.Flow{Source: &flow.Endpoint{Labels: []string{"k8s:app=client", "k8s:io.kubernetes.pod.namespace=default"}},
				EgressAllowedBy: []*flow.Policy{{Name: "allow-web", Namespace: "default", Kind: "CiliumNetworkPolicy"}}}},
		{name: "oneof member held", paths: []string{"l4.TCP.destination_port"}, in: tcpFlow(),
			want: &flow.Flow{L4: &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{DestinationPort: 80}}}}},
		{name: "oneof member not held makes nothing", paths: []string{"l4.TCP.destination_port"}, in: udp,
			want: &flow.Flow{L4: &flow.Layer4{}}},
		{name: "oneof kept whole", paths: []string{"l4"}, in: udp, want: udp},
		{name: "a path under a whole one adds nothing", paths: []string{"source", "source.pod_name"}, in: tcpFlow(),
			want: &flow.Flow{Source: tcpFlow().Source}},
		{name: "a whole one after a path under it", paths: []string{"source.pod_name", "source"}, in: tcpFlow(),
			want: &flow.Flow{Source: tcpFlow().Source}},
		{name: "absent message is not made", paths: []string{"ethernet.source", "l7"}, in: tcpFlow(), want: &flow.Flow{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			before := proto.Clone(tc.in)
			got := m.Apply(tc.in)
			if !proto.Equal(tc.want, got) {
				t.Errorf("Apply(%v) = %v, want %v", tc.paths, got, tc.want)
			}
			if !proto.Equal(before, tc.in) {
				t.Errorf("Apply changed its input")
			}
		})
	}
}

func TestNoMaskKeepsWholeFlows(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := tcpFlow()
	if m.Active() || m.Apply(f) != f {
		t.Errorf("an empty mask changed the flow")
	}
}

func TestInvalidPaths(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"sauce", `"sauce": flow.Flow has no field "sauce"`},
		{"source.pod", `"source.pod": flow.Endpoint has no field "pod"`},
		{"l4.TCP.port", `"l4.TCP.port": flow.TCP has no field "port"`},
		{"source.labels.x", `"source.labels.x": flow.Endpoint.labels is not a message`},
		{"egress_allowed_by.name", `"egress_allowed_by.name": flow.Flow.egress_allowed_by is not a message`},
		{"verdict.x", `"verdict.x": flow.Flow.verdict is not a message`},
		{"", `"": flow.Flow has no field ""`},
		{"source.", `"source.": flow.Endpoint has no field ""`},
	} {
		_, err := New([]string{"time", tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want an error containing %s", tc.path, err, tc.want)
		}
	}
	if _, err := New(make([]string, MaxPaths+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a mask of %d paths: %v", MaxPaths+1, err)
	}
	// A bad path under a whole one is refused too.
	if _, err := New([]string{"source", "source.nope"}); err == nil {
		t.Errorf("New accepted source.nope")
	}
}

// The mask that upstream hubble sends for its compact, table and dict
// output compiles.
func TestUpstreamDefaultMask(t *testing.T) {
	paths := []string{"time", "verdict", "ethernet", "IP", "l4", "source.identity", "source.namespace", "source.pod_name",
		"destination.identity", "destination.namespace", "destination.pod_name", "Type", "node_name", "l7", "event_type",
		"source_service", "destination_service", "is_reply", "Summary", "ip_trace_id", "traffic_direction",
		"policy_match_type", "ingress_allowed_by", "ingress_denied_by", "egress_allowed_by", "egress_denied_by"}
	m, err := New(paths)
	if err != nil {
		t.Fatal(err)
	}
	got := m.Apply(tcpFlow())
	if got.GetSource().GetPodName() != "client" || got.GetSource().GetLabels() != nil || got.GetNodeName() != "node-a" {
		t.Errorf("masked flow %v", got)
	}
}

func BenchmarkApply(b *testing.B) {
	m, err := New([]string{"time", "verdict", "IP", "l4", "source.pod_name", "source.namespace", "destination.pod_name", "node_name"})
	if err != nil {
		b.Fatal(err)
	}
	f := tcpFlow()
	b.ReportAllocs()
	for b.Loop() {
		m.Apply(f)
	}
}
