package main

import (
	"bytes"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	relaypb "github.com/cilium/cilium/api/v1/relay"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
)

// requestOf parses args as observe's flags and builds the request.
func requestOf(t *testing.T, args ...string) (*observer.GetFlowsRequest, error) {
	t.Helper()
	cmd, o := observeCommand(&globals{out: &bytes.Buffer{}})
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return o.request(cmd, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
}

func filtersJSON(t *testing.T, req *observer.GetFlowsRequest) string {
	t.Helper()
	var parts []string
	for _, f := range req.GetWhitelist() {
		b, err := protojson.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		json.Unmarshal(b, &v)
		c, _ := json.Marshal(v) // compact, stable
		parts = append(parts, string(c))
	}
	return strings.Join(parts, " ")
}

func TestObserveFlagsBuildHubblesFilters(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		number uint64
		follow bool
		want   string
	}{
		{nil, 20, false, `{}`},
		{[]string{"-f"}, 0, true, `{}`},
		{[]string{"--last", "5", "-f"}, 5, true, `{}`},
		{[]string{"--pod", "x/a", "--verdict", "dropped"}, 20, false,
			`{"sourcePod":["x/a"],"verdict":["DROPPED"]} {"destinationPod":["x/a"],"verdict":["DROPPED"]}`},
		{[]string{"--namespace", "x", "--pod", "a"}, 20, false, `{"sourcePod":["x/a"]} {"destinationPod":["x/a"]}`},
		{[]string{"--from-pod", "x/a", "--to-port", "80", "--protocol", "tcp"}, 20, false,
			`{"destinationPort":["80"],"protocol":["tcp"],"sourcePod":["x/a"]}`},
		{[]string{"--namespace", "x"}, 20, false, `{"sourcePod":["x/"]} {"destinationPod":["x/"]}`},
		{[]string{"--to-identity", "300", "--type", "policy-verdict", "--type", "trace:to-endpoint"}, 20, false,
			`{"destinationIdentity":[300],"eventType":[{"type":5},{"matchSubType":true,"type":4}]}`},
		{[]string{"--tcp-flags", "SYN,ACK", "--drop-reason-desc", "policy_denied", "--traffic-direction", "ingress"}, 20, false,
			`{"dropReasonDesc":["POLICY_DENIED"],"tcpFlags":[{"ACK":true,"SYN":true}],"trafficDirection":["INGRESS"]}`},
		{[]string{"--first", "3"}, 3, false, `{}`},
		// L7 flows, as Hubble's CLI asks for them.
		{[]string{"--type", "l7", "--protocol", "dns"}, 20, false, `{"eventType":[{"type":129}],"protocol":["dns"]}`},
		{[]string{"-t", "129"}, 20, false, `{"eventType":[{"type":129}]}`},
		{[]string{"--type", "l7", "--http-method", "get", "--http-status", "5+", "--http-path", "/api/v{1,2}/.*",
			"--http-url", "http://.*", "--http-header", "user-agent:curl/8"}, 20, false,
			`{"eventType":[{"type":129}],"httpHeader":[{"key":"user-agent","value":"curl/8"}],"httpMethod":["get"],` +
				`"httpPath":["/api/v{1,2}/.*"],"httpStatusCode":["5+"],"httpUrl":["http://.*"]}`},
		{[]string{"--fqdn", "*.cilium.io", "--http-status", "200"}, 20, false,
			`{"httpStatusCode":["200"],"sourceFqdn":["*.cilium.io"]} {"destinationFqdn":["*.cilium.io"],"httpStatusCode":["200"]}`},
		{[]string{"--to-fqdn", "*.example.com", "--from-pod", "x/a"}, 20, false, `{"destinationFqdn":["*.example.com"],"sourcePod":["x/a"]}`},
		{[]string{"--from-fqdn", "cilium.io", "--to-ip", "10.0.0.1"}, 20, false, `{"destinationIp":["10.0.0.1"],"sourceFqdn":["cilium.io"]}`},
	} {
		req, err := requestOf(t, tc.args...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if req.GetNumber() != tc.number || req.GetFollow() != tc.follow {
			t.Errorf("%v: number %d follow %v, want %d %v", tc.args, req.GetNumber(), req.GetFollow(), tc.number, tc.follow)
		}
		if got := filtersJSON(t, req); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
	req, err := requestOf(t, "--since", "5m", "--until", "2026-12-02T11:59:00Z")
	if err != nil || !req.GetSince().AsTime().Equal(time.Date(2026, 12, 2, 11, 55, 0, 0, time.UTC)) ||
		!req.GetUntil().AsTime().Equal(time.Date(2026, 12, 2, 11, 59, 0, 0, time.UTC)) || req.GetNumber() != 0 {
		t.Errorf("since and until: %v %v", req, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--verdict", "maybe"}, "--verdict"},
		{[]string{"--type", "l8"}, "--type"},
		{[]string{"--http-header", "user-agent"}, "--http-header"},
		{[]string{"--fqdn", "*.cilium.io", "--ip", "10.0.0.1"}, "--fqdn and --ip"},
		{[]string{"--to-fqdn", "*.cilium.io", "--namespace", "x"}, "--to-fqdn and --namespace"},
		{[]string{"--fqdn", "a.example", "--from-fqdn", "b.example"}, "--fqdn and --from-fqdn"},
		{[]string{"--tcp-flags", "SYN,XMAS"}, "--tcp-flags"},
		{[]string{"--since", "yesterday"}, "--since"},
		{[]string{"--first", "1", "--last", "1"}, "--first"},
		{[]string{"--drop-reason-desc", "bad"}, "--drop-reason-desc"},
	} {
		if _, err := requestOf(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestObserveAndStatusAgainstAServer runs the CLI against the Observer
// service on a unix socket, as against an agent.
func TestObserveAndStatusAgainstAServer(t *testing.T) {
	ring, _ := container.NewRing(15)
	at := time.Now().Add(-time.Minute).Truncate(time.Second) // within the hour GetNamespaces looks at
	ring.Write(container.Event{Flow: &flow.Flow{Time: timestamppb.New(at), Verdict: flow.Verdict_DROPPED, NodeName: "n1",
		IP:          &flow.IP{Source: "10.0.1.5", Destination: "10.0.2.7"},
		L4:          &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: 80, Flags: &flow.TCPFlags{SYN: true}}}},
		Source:      &flow.Endpoint{Identity: 300, Namespace: "x", PodName: "a"},
		Destination: &flow.Endpoint{Identity: 2, Labels: []string{"reserved:world"}},
		EventType:   &flow.CiliumEventType{Type: 1, SubType: 181}, DropReasonDesc: flow.DropReason_POLICY_DENY,
		EgressDeniedBy: []*flow.Policy{{Kind: "CiliumNetworkPolicy", Namespace: "x", Name: "no-world"}},
	}})
	ring.Write(container.Event{Flow: &flow.Flow{Time: timestamppb.New(at.Add(time.Second)), Verdict: flow.Verdict_FORWARDED, NodeName: "n1",
		IP: &flow.IP{Source: "10.0.2.7", Destination: "10.0.1.5"}, IsReply: wrapperspb.Bool(true),
		L4:     &flow.Layer4{Protocol: &flow.Layer4_UDP{UDP: &flow.UDP{SourcePort: 53, DestinationPort: 4000}}},
		Source: &flow.Endpoint{Identity: 400, Namespace: "y", PodName: "dns"}, Destination: &flow.Endpoint{Identity: 300, Namespace: "x", PodName: "a"},
		EventType: &flow.CiliumEventType{Type: 4, SubType: 0},
	}})
	agent, _ := container.NewRing(7)
	agent.Write(container.Event{Agent: &observer.GetAgentEventsResponse{NodeName: "n1", Time: timestamppb.New(at),
		AgentEvent: &flow.AgentEvent{Type: flow.AgentEventType_ENDPOINT_CREATED, Notification: &flow.AgentEvent_EndpointUpdate{
			EndpointUpdate: &flow.EndpointUpdateNotification{Id: 42, Namespace: "x", PodName: "a"}}}}})
	run := serveRings(t, ring, agent)
	want := at.Format(time.StampMilli) + ": x/a:40000 (ID:300) <> 10.0.2.7:80 (world) Policy deny DROPPED (TCP Flags: SYN) egress-denied-by=CiliumNetworkPolicy:x/no-world\n" +
		at.Add(time.Second).Format(time.StampMilli) + ": x/a:4000 (ID:300) <- y/dns:53 (ID:400) to-endpoint FORWARDED (UDP)\n"
	if got := run("observe", "--print-policy-names"); got != want {
		t.Errorf("compact:\n got %q\nwant %q", got, want)
	}
	if got := run("observe", "--verdict", "FORWARDED", "-o", "json"); !strings.Contains(got, `"pod_name":"dns"`) || strings.Count(got, "\n") != 1 {
		t.Errorf("json: %s", got)
	}
	if got := run("observe", "--last", "1", "-o", "table"); !strings.HasPrefix(got, "TIMESTAMP") || !strings.Contains(got, "y/dns:53") ||
		strings.Contains(got, "x/a:40000") {
		t.Errorf("table:\n%s", got)
	}
	if got, want := run("observe", "agent-events"), at.Format(time.StampMilli)+" [n1]: ENDPOINT_CREATED (id: 42, namespace: x, pod name: a)\n"; got != want {
		t.Errorf("agent events:\n got %q\nwant %q", got, want)
	}
	if got := run("list", "namespaces"); got != "NAMESPACE\nx\ny\n" {
		t.Errorf("list namespaces:\n%s", got)
	}
	if got := run("status"); !strings.Contains(got, "Current/Max Flows: 2/15") || !strings.Contains(got, "Connected Nodes: 1/1") {
		t.Errorf("status:\n%s", got)
	}
}

// serveRings serves the rings' flows and agent events as node n1's
// Observer service on a unix socket, and runs the CLI against it.
func serveRings(t *testing.T, ring, agent *container.Ring) (run func(args ...string) string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "hubble.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	observer.RegisterObserverServer(srv, hubbleobserver.New(ring, "n1", "cilium-go test").WithAgentEvents(agent))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := newRootCommand(&out)
		cmd.SetArgs(append(args, "--server", "unix://"+sock))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
}

// TestL7FlowsAndNames: the L7 flags and --fqdn select, through the
// server's filters, the flows Hubble's would; L7 flows print with their
// protocol and kind as the type and their record as the summary, and a
// side known by DNS names prints by them, as Hubble's compact output.
func TestL7FlowsAndNames(t *testing.T) {
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	client := &flow.Endpoint{ID: 7, Identity: 1001, Namespace: "default", PodName: "client"}
	world := &flow.Endpoint{Identity: 2, Labels: []string{"reserved:world"}}
	ring, _ := container.NewRing(15)
	for i, f := range []*flow.Flow{
		{Verdict: flow.Verdict_FORWARDED, IsReply: wrapperspb.Bool(false), EventType: &flow.CiliumEventType{Type: 4, SubType: 3},
			IP: &flow.IP{Source: "10.0.1.5", Destination: "192.0.2.10"}, Source: client, Destination: world,
			L4:               &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 40000, DestinationPort: 443, Flags: &flow.TCPFlags{SYN: true}}}},
			DestinationNames: []string{"world.example"}},
		{Verdict: flow.Verdict_FORWARDED, IsReply: wrapperspb.Bool(false), EventType: &flow.CiliumEventType{Type: 129}, Type: flow.FlowType_L7,
			IP: &flow.IP{Source: "10.0.1.5", Destination: "10.0.3.10"}, Source: client,
			Destination: &flow.Endpoint{Identity: 1003, Namespace: "kube-system", PodName: "coredns-0"},
			L4:          &flow.Layer4{Protocol: &flow.Layer4_UDP{UDP: &flow.UDP{SourcePort: 40000, DestinationPort: 53}}},
			L7: &flow.Layer7{Type: flow.L7FlowType_REQUEST, Record: &flow.Layer7_Dns{Dns: &flow.DNS{Query: "world.example.",
				Qtypes: []string{"A"}, ObservationSource: "proxy"}}},
			Summary: "DNS Query world.example. A"},
		// No summary: deprecated, a server may leave it out.
		{Verdict: flow.Verdict_FORWARDED, IsReply: wrapperspb.Bool(true), EventType: &flow.CiliumEventType{Type: 129}, Type: flow.FlowType_L7,
			IP: &flow.IP{Source: "192.0.2.10", Destination: "10.0.1.5"}, Source: world, Destination: client,
			L4: &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{SourcePort: 80, DestinationPort: 42000}}},
			L7: &flow.Layer7{Type: flow.L7FlowType_RESPONSE, LatencyNs: uint64(10 * time.Millisecond), Record: &flow.Layer7_Http{Http: &flow.HTTP{
				Method: "GET", Url: "http://world.example/", Protocol: "HTTP/1.1", Code: 200}}},
			SourceNames: []string{"world.example"}},
	} {
		f.Time, f.NodeName = timestamppb.New(at.Add(time.Duration(i)*time.Second)), "n1"
		ring.Write(container.Event{Flow: f})
	}
	agent, _ := container.NewRing(7)
	run := serveRings(t, ring, agent)
	ts := func(i int) string { return at.Add(time.Duration(i)*time.Second).Format(time.StampMilli) + ": " }
	lines := []string{
		ts(0) + "default/client:40000 (ID:1001) -> world.example:443 (world) to-stack FORWARDED (TCP Flags: SYN)\n",
		ts(1) + "default/client:40000 (ID:1001) -> kube-system/coredns-0:53 (ID:1003) dns-request proxy FORWARDED (DNS Query world.example. A)\n",
		ts(2) + "default/client:42000 (ID:1001) <- world.example:80 (world) http-response FORWARDED (HTTP/1.1 200 10ms (GET http://world.example/))\n",
	}
	for _, tc := range []struct {
		args []string
		want []int
	}{
		{[]string{"--type", "l7"}, []int{1, 2}},
		{[]string{"--type", "l7", "--protocol", "dns"}, []int{1}},
		{[]string{"--protocol", "http", "--http-status", "2+", "--http-method", "get", "--http-path", "^/$"}, []int{2}},
		{[]string{"--http-status", "404"}, nil},
		{[]string{"--fqdn", "*.example"}, []int{0, 2}},
		{[]string{"--to-fqdn", "world.example"}, []int{0}},
		{[]string{"--from-fqdn", "world.example"}, []int{2}},
	} {
		var want string
		for _, i := range tc.want {
			want += lines[i]
		}
		if got := run(append([]string{"observe"}, tc.args...)...); got != want {
			t.Errorf("observe %v:\n got %q\nwant %q", tc.args, got, want)
		}
	}
	if got := run("observe", "--type", "l7", "--protocol", "http", "-o", "json"); !strings.Contains(got, `"source_names":["world.example"]`) ||
		!strings.Contains(got, `"code":200`) || strings.Count(got, "\n") != 1 {
		t.Errorf("json:\n%s", got)
	}
}

// TestRelayAnswersPrintAsHubbles: the nodes table and the warnings about
// nodes a relay could not ask.
func TestRelayAnswersPrintAsHubbles(t *testing.T) {
	var out bytes.Buffer
	printNodes(&out, []*observer.Node{
		{Name: "node1", State: relaypb.NodeState_NODE_CONNECTED, UptimeNs: uint64(90 * time.Second), SeenFlows: 180, NumFlows: 100, MaxFlows: 4095},
		{Name: "node2", State: relaypb.NodeState_NODE_UNAVAILABLE},
	})
	want := "NAME    STATUS        AGE     FLOWS/S   CURRENT/MAX-FLOWS\n" +
		"node1   Connected     1m30s   2.00      100/4095 (2.44%)\n" +
		"node2   Unavailable   N/A     N/A       N/A\n"
	if out.String() != want {
		t.Errorf("nodes:\n%s\nwant:\n%s", out.String(), want)
	}
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.Local)
	status := func(s relaypb.NodeState, msg string, nodes ...string) string {
		return nodeStatusLine(&observer.GetFlowsResponse{Time: timestamppb.New(at), NodeName: "relay",
			ResponseTypes: &observer.GetFlowsResponse_NodeStatus{NodeStatus: &relaypb.NodeStatusEvent{StateChange: s, NodeNames: nodes, Message: msg}}})
	}
	if got, want := status(relaypb.NodeState_NODE_UNAVAILABLE, "", "node2", "node3"), "Dec  2 10:00:00.000 [relay]: 2 nodes are unavailable: node2, node3"; got != want {
		t.Errorf("unavailable: %q, want %q", got, want)
	}
	if got := status(relaypb.NodeState_NODE_ERROR, "boom", "node2"); !strings.HasSuffix(got, `Error "boom" on 1 nodes: node2`) {
		t.Errorf("error: %q", got)
	}
	if got := status(relaypb.NodeState_NODE_CONNECTED, "", "node1"); got != "" {
		t.Errorf("connected is not a warning: %q", got)
	}
}

// A socket trace prints as Hubble's: its translation point as the type,
// the Service where the destination is no pod, TCP or UDP as the summary.
func TestSocketTracePrintsAsHubbles(t *testing.T) {
	var out bytes.Buffer
	p, err := newPrinter("compact", &out, false)
	if err != nil {
		t.Fatal(err)
	}
	f := &flow.Flow{Time: timestamppb.Now(), Type: flow.FlowType_SOCK, Verdict: flow.Verdict_TRACED,
		EventType:      &flow.CiliumEventType{Type: 7, SubType: 1},
		SockXlatePoint: flow.SocketTranslationPoint_SOCK_XLATE_POINT_PRE_DIRECTION_FWD,
		IP:             &flow.IP{Source: "10.0.0.5", Destination: "10.96.0.10", IpVersion: flow.IPVersion_IPv4},
		L4:             &flow.Layer4{Protocol: &flow.Layer4_TCP{TCP: &flow.TCP{DestinationPort: 80}}},
		Source:         &flow.Endpoint{Identity: 1000, Namespace: "default", PodName: "client"},
		Destination:    &flow.Endpoint{}, DestinationService: &flow.Service{Name: "echo", Namespace: "default"}, Summary: "TCP"}
	if err := p.print(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: f}}); err != nil {
		t.Fatal(err)
	}
	p.flush()
	if got := out.String(); !strings.Contains(got, "default/client:0 (ID:1000) <> default/echo:80 (ID:0) pre-xlate-fwd TRACED (TCP)") {
		t.Errorf("printed %q", got)
	}
}
