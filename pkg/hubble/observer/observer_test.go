package observer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/hubble/container"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// flowAt is flow n, n seconds after t0, forwarded when n is even.
func flowAt(n int) *flow.Flow {
	v := flow.Verdict_FORWARDED
	if n%2 == 1 {
		v = flow.Verdict_DROPPED
	}
	return &flow.Flow{Uuid: fmt.Sprint(n), Time: timestamppb.New(t0.Add(time.Duration(n) * time.Second)), Verdict: v}
}

// serve runs the server on a unix socket, as the agent does, and returns
// a client of it.
func serve(t *testing.T, ring *container.Ring) observer.ObserverClient {
	t.Helper()
	return serveServer(t, New(ring, "node-1", "cilium-go test"))
}

func serveServer(t *testing.T, s *Server) observer.ObserverClient {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "hubble.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	observer.RegisterObserverServer(srv, s)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return observer.NewObserverClient(conn)
}

// uuids runs a request to its end and lists the flows' uuids.
func uuids(t *testing.T, c observer.ObserverClient, req *observer.GetFlowsRequest) []string {
	t.Helper()
	stream, err := c.GetFlows(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		if resp.GetNodeName() != "node-1" {
			t.Fatalf("response of node %q", resp.GetNodeName())
		}
		out = append(out, resp.GetFlow().GetUuid())
	}
}

func TestGetFlows(t *testing.T) {
	ring, _ := container.NewRing(7)
	for i := range 10 {
		ring.Write(container.Event{Flow: flowAt(i)})
	}
	c := serve(t, ring)
	forwarded := []*flow.FlowFilter{{Verdict: []flow.Verdict{flow.Verdict_FORWARDED}}}
	for _, tc := range []struct {
		name string
		req  *observer.GetFlowsRequest
		want []string
	}{
		{"all held", &observer.GetFlowsRequest{}, []string{"3", "4", "5", "6", "7", "8", "9"}},
		{"the last", &observer.GetFlowsRequest{Number: 3}, []string{"7", "8", "9"}},
		{"the first", &observer.GetFlowsRequest{Number: 2, First: true}, []string{"3", "4"}},
		{"the last that pass", &observer.GetFlowsRequest{Number: 2, Whitelist: forwarded}, []string{"6", "8"}},
		{"blacklisted", &observer.GetFlowsRequest{Blacklist: forwarded}, []string{"3", "5", "7", "9"}},
		{"since", &observer.GetFlowsRequest{Since: timestamppb.New(t0.Add(8 * time.Second))}, []string{"8", "9"}},
		{"until", &observer.GetFlowsRequest{Until: timestamppb.New(t0.Add(4 * time.Second))}, []string{"3", "4"}},
		{"window, last", &observer.GetFlowsRequest{Number: 1, Since: timestamppb.New(t0.Add(4 * time.Second)),
			Until: timestamppb.New(t0.Add(6 * time.Second))}, []string{"6"}},
		{"more than held", &observer.GetFlowsRequest{Number: 100}, []string{"3", "4", "5", "6", "7", "8", "9"}},
	} {
		if got := uuids(t, c, tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	nodes, err := c.GetNodes(context.Background(), &observer.GetNodesRequest{})
	if err != nil || len(nodes.GetNodes()) != 1 || nodes.GetNodes()[0].GetName() != "node-1" || nodes.GetNodes()[0].GetNumFlows() != 7 {
		t.Errorf("nodes %v, %v", nodes, err)
	}
	st, err := c.ServerStatus(context.Background(), &observer.ServerStatusRequest{})
	if err != nil || st.GetNumFlows() != 7 || st.GetMaxFlows() != 7 || st.GetSeenFlows() != 10 || st.GetVersion() != "cilium-go test" ||
		st.GetNumConnectedNodes().GetValue() != 1 {
		t.Errorf("status %v, %v", st, err)
	}
}

func TestGetFlowsRefusesWhatItCannotDo(t *testing.T) {
	ring, _ := container.NewRing(7)
	c := serve(t, ring)
	for _, req := range []*observer.GetFlowsRequest{
		{Whitelist: []*flow.FlowFilter{{HttpStatusCode: []string{"2xx"}}}},
		{Blacklist: []*flow.FlowFilter{{SourceIp: []string{"nope"}}}},
		{Since: timestamppb.New(t0.Add(time.Hour)), Until: timestamppb.New(t0)},
	} {
		stream, err := c.GetFlows(context.Background(), req)
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req, err)
		}
	}
}

// TestFollow: the last flow, then each new one that passes, until the
// client goes.
func TestFollow(t *testing.T) {
	ring, _ := container.NewRing(15)
	ring.Write(container.Event{Flow: flowAt(0)})
	ring.Write(container.Event{Flow: flowAt(1)})
	c := serve(t, ring)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.GetFlows(ctx, &observer.GetFlowsRequest{Number: 1, Follow: true,
		Blacklist: []*flow.FlowFilter{{Verdict: []flow.Verdict{flow.Verdict_DROPPED}}}})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() string {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetFlow().GetUuid()
	}
	if got := recv(); got != "0" {
		t.Fatalf("first %s, want the last forwarded one, 0", got)
	}
	for i := 2; i < 6; i++ {
		ring.Write(container.Event{Flow: flowAt(i)})
	}
	if a, b := recv(), recv(); a != "2" || b != "4" {
		t.Fatalf("followed %s, %s; want 2, 4", a, b)
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
}

// TestLostEventsAmongTheFlows: a record of events lost before the ring
// is sent where it happened, whatever the filters.
func TestLostEventsAmongTheFlows(t *testing.T) {
	ring, _ := container.NewRing(7)
	ring.Write(container.Event{Flow: flowAt(0)})
	ring.Write(container.Event{Lost: &flow.LostEvent{Source: flow.LostEventSource_OBSERVER_EVENTS_QUEUE, NumEventsLost: 5}})
	ring.Write(container.Event{Flow: flowAt(2)})
	c := serve(t, ring)
	stream, err := c.GetFlows(context.Background(), &observer.GetFlowsRequest{
		Whitelist: []*flow.FlowFilter{{Verdict: []flow.Verdict{flow.Verdict_FORWARDED}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l := resp.GetLostEvents(); l != nil {
			got = append(got, fmt.Sprintf("lost %d from %s", l.GetNumEventsLost(), l.GetSource()))
		} else {
			got = append(got, resp.GetFlow().GetUuid())
		}
	}
	if want := []string{"0", "lost 5 from OBSERVER_EVENTS_QUEUE", "2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := uuids(t, c, &observer.GetFlowsRequest{Number: 1}); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("the last flow: %v", got)
	}
}

func TestGetNamespaces(t *testing.T) {
	ring, _ := container.NewRing(7)
	now := time.Now()
	for i, ns := range []string{"old", "b", "a"} {
		f := &flow.Flow{Time: timestamppb.New(now.Add(-2 * time.Hour).Add(time.Duration(i) * time.Hour)),
			Source: &flow.Endpoint{Namespace: ns, ClusterName: "default"}, Destination: &flow.Endpoint{Namespace: "b", ClusterName: "default"}}
		ring.Write(container.Event{Flow: f})
	}
	resp, err := serve(t, ring).GetNamespaces(context.Background(), &observer.GetNamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range resp.GetNamespaces() {
		got = append(got, n.GetCluster()+"/"+n.GetNamespace())
	}
	if !slices.Equal(got, []string{"default/a", "default/b"}) {
		t.Fatalf("namespaces %v, want a and b (old is older than an hour)", got)
	}
}

// TestFollowerLappedIsTold: a follower whose next position the writer
// overwrote is told how many it lost, then goes on with the oldest held.
func TestFollowerLappedIsTold(t *testing.T) {
	ring, _ := container.NewRing(7)
	for i := range 20 {
		ring.Write(container.Event{Flow: flowAt(i)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	err := query{follow: true}.followFrom(ctx, ring, 2, func(container.Event) bool { return true }, func(ev container.Event) error {
		if ev.Lost != nil {
			got = append(got, fmt.Sprintf("lost %d from %s", ev.Lost.GetNumEventsLost(), ev.Lost.GetSource()))
		} else {
			got = append(got, ev.Flow.GetUuid())
		}
		cancel() // ends the follow once it has caught up
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lost 11 from HUBBLE_RING_BUFFER", "13", "14", "15", "16", "17", "18", "19"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestGetAgentEvents: the agent's events are asked for as flows are: the
// last ones, a window, following; a server without them says so.
func TestGetAgentEvents(t *testing.T) {
	agent, _ := container.NewRing(7)
	ev := func(n int, typ flow.AgentEventType) {
		agent.Write(container.Event{Agent: &observer.GetAgentEventsResponse{NodeName: "node-1",
			Time: timestamppb.New(t0.Add(time.Duration(n) * time.Second)),
			AgentEvent: &flow.AgentEvent{Type: typ, Notification: &flow.AgentEvent_EndpointUpdate{
				EndpointUpdate: &flow.EndpointUpdateNotification{Id: uint64(n)}}}}})
	}
	for n := range 5 {
		ev(n, flow.AgentEventType_ENDPOINT_CREATED)
	}
	flows, _ := container.NewRing(7)
	c := serveServer(t, New(flows, "node-1", "test").WithAgentEvents(agent))
	ids := func(req *observer.GetAgentEventsRequest, n int) []uint64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := c.GetAgentEvents(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for len(out) < n || n < 0 {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.GetAgentEvent().GetEndpointUpdate().GetId())
		}
		return out
	}
	if got := ids(&observer.GetAgentEventsRequest{Number: 2}, -1); !slices.Equal(got, []uint64{3, 4}) {
		t.Errorf("last 2: %v", got)
	}
	if got := ids(&observer.GetAgentEventsRequest{Since: timestamppb.New(t0.Add(time.Second)), Until: timestamppb.New(t0.Add(2 * time.Second))}, -1); !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("window: %v", got)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		ev(9, flow.AgentEventType_ENDPOINT_DELETED)
	}()
	if got := ids(&observer.GetAgentEventsRequest{Number: 1, Follow: true}, 2); !slices.Equal(got, []uint64{4, 9}) {
		t.Errorf("follow: %v", got)
	}

	stream, err := serve(t, flows).GetAgentEvents(context.Background(), &observer.GetAgentEventsRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("a server without agent events: %v", err)
	}
}

// TestFieldMask: only the fields asked for go out, and the response
// keeps the whole flow's time and node, which the relay merges by.
func TestFieldMask(t *testing.T) {
	ring, _ := container.NewRing(7)
	f := flowAt(2)
	f.Source = &flow.Endpoint{PodName: "client", Namespace: "default", Labels: []string{"k8s:app=client"}}
	f.NodeName = "node-1"
	ring.Write(container.Event{Flow: f})
	c := serve(t, ring)
	stream, err := c.GetFlows(context.Background(), &observer.GetFlowsRequest{FieldMask: &fieldmaskpb.FieldMask{Paths: []string{"verdict", "source.pod_name"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := &flow.Flow{Verdict: flow.Verdict_FORWARDED, Source: &flow.Endpoint{PodName: "client"}}
	if !proto.Equal(resp.GetFlow(), want) {
		t.Errorf("masked flow %v, want %v", resp.GetFlow(), want)
	}
	if !resp.GetTime().AsTime().Equal(t0.Add(2*time.Second)) || resp.GetNodeName() != "node-1" {
		t.Errorf("response time %v node %q: want the flow's", resp.GetTime().AsTime(), resp.GetNodeName())
	}
	// The ring's flow is untouched.
	if ev, _, _ := ring.At(0); len(ev.Flow.GetSource().GetLabels()) != 1 || ev.Flow.GetUuid() != "2" {
		t.Errorf("the ring's flow changed: %v", ev.Flow)
	}

	stream, err = c.GetFlows(context.Background(), &observer.GetFlowsRequest{FieldMask: &fieldmaskpb.FieldMask{Paths: []string{"time", "source.pod_nam"}}})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"source.pod_nam"`) {
		t.Errorf("unknown path: %v, want InvalidArgument naming source.pod_nam", err)
	}
}

// TestGetDebugEvents: none, but not Unimplemented; a follower stays until
// it leaves.
func TestGetDebugEvents(t *testing.T) {
	ring, _ := container.NewRing(7)
	c := serve(t, ring)
	stream, err := c.GetDebugEvents(context.Background(), &observer.GetDebugEventsRequest{Number: 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("debug events: %v, want an empty answer", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	stream, err = c.GetDebugEvents(ctx, &observer.GetDebugEventsRequest{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	// The deadline ends it on both sides: the client may see its own
	// end or the server's.
	_, err = stream.Recv()
	if took := time.Since(start); took < 200*time.Millisecond || (status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, io.EOF)) {
		t.Fatalf("followed debug events: %v after %v, want open until the client's deadline", err, took)
	}
}
