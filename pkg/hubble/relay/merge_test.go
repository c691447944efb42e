package relay

//lint:file-ignore SA1019 Summary (deprecated in flow.proto) tells the test's flows apart; the relay passes it on untouched.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// pausingNode answers GetFlows with flows at base+ms, in order, and
// waits for release before the one at position pause.
type pausingNode struct {
	observer.UnimplementedObserverServer
	name    string
	base    time.Time
	ms      []int
	pause   int
	release chan struct{}
}

func (p *pausingNode) GetFlows(_ *observer.GetFlowsRequest, stream observer.Observer_GetFlowsServer) error {
	for i, ms := range p.ms {
		if i == p.pause {
			select {
			case <-p.release:
			case <-stream.Context().Done():
				return nil
			}
		}
		at := timestamppb.New(p.base.Add(time.Duration(ms) * time.Millisecond))
		err := stream.Send(&observer.GetFlowsResponse{NodeName: p.name, Time: at, ResponseTypes: &observer.GetFlowsResponse_Flow{
			Flow: &flow.Flow{Time: at, NodeName: p.name, Verdict: flow.Verdict_FORWARDED, Summary: fmt.Sprint(ms)}}})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestNonFollowedFlowsStreamAsTheyMerge: the relay sends the oldest flows
// while a node has not finished answering, and ends an answer of the
// first flows without waiting for it.
func TestNonFollowedFlowsStreamAsTheyMerge(t *testing.T) {
	paused := &pausingNode{name: "node-a", base: time.Now().Add(-time.Minute), ms: []int{1, 3, 5}, pause: 2, release: make(chan struct{})}
	c := newClusterOf(t, map[string]observer.ObserverServer{"node-a": paused}, "node-a", "node-b")
	c.base = paused.base
	c.write(1, 2)
	c.write(1, 4)
	client := c.relay(t, "relay")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// node-a is paused after its flow at 3: everything older than its next
	// one can go, and does.
	stream, err := client.GetFlows(ctx, &observer.GetFlowsRequest{})
	must(t, err)
	want := []string{"status NODE_CONNECTED node-a,node-b", "node-a 1", "node-b 2", "node-a 3"}
	if got := answer(t, stream, len(want)); !slices.Equal(got, want) {
		t.Fatalf("while node-a is paused: %q, want %q", got, want)
	}
	// The first two flows need nothing more of node-a.
	if got, want := flows(t, client, &observer.GetFlowsRequest{Number: 2, First: true}),
		[]string{"status NODE_CONNECTED node-a,node-b", "node-a 1", "node-b 2"}; !slices.Equal(got, want) {
		t.Errorf("first 2 while node-a is paused: %q, want %q", got, want)
	}
	close(paused.release)
	if got, want := answer(t, stream, -1), []string{"node-b 4", "node-a 5"}; !slices.Equal(got, want) {
		t.Errorf("after node-a went on: %q, want %q", got, want)
	}
}

// oldCut is how the relay answered before it merged as the nodes
// answer: every node's whole answer, sorted, then cut to number flows.
func oldCut(all []*observer.GetFlowsResponse, req *observer.GetFlowsRequest) []*observer.GetFlowsResponse {
	slices.SortStableFunc(all, func(a, b *observer.GetFlowsResponse) int { return respTime(a).Compare(respTime(b)) })
	n := req.GetNumber()
	if n == 0 {
		return all
	}
	flows := uint64(0)
	if req.GetFirst() {
		for i, r := range all {
			if r.GetFlow() != nil {
				if flows++; flows == n {
					return all[:i+1]
				}
			}
		}
		return all
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].GetFlow() != nil {
			if flows++; flows == n {
				return all[i:]
			}
		}
	}
	return all
}

// TestMergedAnswersAreTheOldCuts: the last and first flows of three
// nodes through the relay are what the sorted whole answers, cut, were.
func TestMergedAnswersAreTheOldCuts(t *testing.T) {
	c := newClusterOf(t, nil, "node-a", "node-b", "node-c")
	// 40 flows spread unevenly: runs of one node, and nodes alternating.
	for ms := 1; ms <= 40; ms++ {
		c.write((ms*ms/7)%3, ms)
	}
	client := c.relay(t, "relay")
	direct := make([]observer.ObserverClient, len(c.nodes))
	for i, n := range c.nodes {
		kp, err := tls.LoadX509KeyPair(c.pki.Path("relay.crt"), c.pki.Path("relay.key"))
		must(t, err)
		conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp},
			RootCAs: c.caPool(t), ServerName: ServerName(n.name, ""), MinVersion: tls.VersionTLS13})))
		must(t, err)
		t.Cleanup(func() { conn.Close() })
		direct[i] = observer.NewObserverClient(conn)
	}
	for _, req := range []*observer.GetFlowsRequest{
		{}, {Number: 1}, {Number: 5}, {Number: 17}, {Number: 40}, {Number: 1000},
		{Number: 1, First: true}, {Number: 5, First: true}, {Number: 17, First: true}, {Number: 1000, First: true},
		{Number: 6, Since: timestamppb.New(c.base.Add(10 * time.Millisecond)), Until: timestamppb.New(c.base.Add(30 * time.Millisecond))},
	} {
		var all []*observer.GetFlowsResponse
		for _, d := range direct {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			stream, err := d.GetFlows(ctx, req)
			must(t, err)
			for {
				r, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				must(t, err)
				all = append(all, r)
			}
			cancel()
		}
		want := []string{"status NODE_CONNECTED node-a,node-b,node-c"}
		for _, r := range oldCut(all, req) {
			want = append(want, r.GetNodeName()+" "+r.GetFlow().GetSummary())
		}
		if got := flows(t, client, req); !slices.Equal(got, want) {
			t.Errorf("%v:\n got %q\nwant %q", req, got, want)
		}
	}
}

// TestRefusedRequestIsRefused: a request the nodes refuse (here a field
// mask of a field flows lack) is the relay's error, with no flow before it.
func TestRefusedRequestIsRefused(t *testing.T) {
	c := newCluster(t)
	c.write(0, 1)
	client := c.relay(t, "relay")
	for _, req := range []*observer.GetFlowsRequest{{}, {Number: 3}, {Number: 3, First: true}} {
		req.FieldMask = &fieldmaskpb.FieldMask{Paths: []string{"time", "no_such_field"}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stream, err := client.GetFlows(ctx, req)
		must(t, err)
		var got []string
		for {
			r, err := stream.Recv()
			if err != nil {
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("%v: %v after %q, want InvalidArgument", req, err, got)
				}
				break
			}
			if r.GetFlow() != nil {
				got = append(got, r.GetFlow().GetSummary())
			}
		}
		if len(got) > 0 {
			t.Errorf("%v: flows %q before the refusal", req, got)
		}
		cancel()
	}
}

func TestTailKeepsTheLastFlows(t *testing.T) {
	flowAt := func(s string) *observer.GetFlowsResponse {
		return &observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: &flow.Flow{Summary: s}}}
	}
	lost := func(s string) *observer.GetFlowsResponse {
		return &observer.GetFlowsResponse{NodeName: s, ResponseTypes: &observer.GetFlowsResponse_LostEvents{LostEvents: &flow.LostEvent{}}}
	}
	show := func(rs []*observer.GetFlowsResponse) []string {
		var out []string
		for _, r := range rs {
			if r.GetFlow() != nil {
				out = append(out, r.GetFlow().GetSummary())
			} else {
				out = append(out, "lost "+r.GetNodeName())
			}
		}
		return out
	}
	in := []*observer.GetFlowsResponse{lost("0"), flowAt("1"), lost("1"), flowAt("2"), flowAt("3"), lost("3"), lost("3b"), flowAt("4"), lost("4")}
	for n := uint64(1); n <= 6; n++ {
		tl := &tail{n: n}
		for _, r := range in {
			tl.add(r)
		}
		// oldCut sorts by time; these have none, and the sort is stable.
		if got, want := show(tl.q), show(oldCut(slices.Clone(in), &observer.GetFlowsRequest{Number: n})); !slices.Equal(got, want) {
			t.Errorf("last %d: %q, want %q", n, got, want)
		}
		if tl.flows > n {
			t.Errorf("last %d: holds %d flows", n, tl.flows)
		}
	}
}
