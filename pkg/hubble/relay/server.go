package relay

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	relaypb "github.com/cilium/cilium/api/v1/relay"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Server answers Hubble's Observer API for every node of a Pool.
type Server struct {
	observer.UnimplementedObserverServer
	pool    *Pool
	version string
	// sortBufferLen and drainTimeout bound how long a followed flow
	// waits to be put in time order among the other nodes' flows: until
	// the buffer holds more flows, or it has waited drainTimeout.
	sortBufferLen int
	drainTimeout  time.Duration
}

// NewServer serves pool's nodes.
func NewServer(pool *Pool, version string, sortBufferLen int, drainTimeout time.Duration) *Server {
	return &Server{pool: pool, version: version, sortBufferLen: max(sortBufferLen, 1), drainTimeout: drainTimeout}
}

func nodeStatus(state relaypb.NodeState, nodes []string, msg string) *observer.GetFlowsResponse {
	return &observer.GetFlowsResponse{Time: timestamppb.Now(), ResponseTypes: &observer.GetFlowsResponse_NodeStatus{
		NodeStatus: &relaypb.NodeStatusEvent{StateChange: state, NodeNames: nodes, Message: msg}}}
}

// GetFlows asks every connected node the same question and merges the
// answers in time order. It first says which nodes answer and which do
// not; a node whose stream breaks is reported where it broke. Without
// follow, number applies to the merge: the last (or first) number flows
// of the cluster; the answer streams as the nodes' answers come, and a
// request a node refuses (a bad filter) is refused.
func (s *Server) GetFlows(req *observer.GetFlowsRequest, stream observer.Observer_GetFlowsServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	connected, unavailable := s.pool.split(ctx)
	if len(connected) > 0 {
		if err := stream.Send(nodeStatus(relaypb.NodeState_NODE_CONNECTED, names(connected), "")); err != nil {
			return err
		}
	}
	if len(unavailable) > 0 {
		if err := stream.Send(nodeStatus(relaypb.NodeState_NODE_UNAVAILABLE, names(unavailable), "")); err != nil {
			return err
		}
	}
	if !req.GetFollow() {
		return sendMerged(ctx, connected, req, stream.Send)
	}
	in := make(chan *observer.GetFlowsResponse, s.sortBufferLen)
	var wg sync.WaitGroup
	for _, n := range connected {
		wg.Go(func() { collect(ctx, n, req, in) })
	}
	go func() {
		wg.Wait()
		close(in)
	}()
	return s.sendSorted(ctx, in, stream)
}

// collect streams n's followed answer into out. A stream that breaks for
// another reason than the request's end becomes a node status in the
// answer.
func collect(ctx context.Context, n *node, req *observer.GetFlowsRequest, out chan<- *observer.GetFlowsResponse) {
	put := func(r *observer.GetFlowsResponse) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if err := askNode(ctx, n, req, put); err != nil {
		put(brokenStatus(n, err))
	}
}

// askNode gives deliver n's answer to req, each response named by its
// node, until the stream ends or deliver says no more. It returns the
// error that broke the stream; nil at its end or ctx's.
func askNode(ctx context.Context, n *node, req *observer.GetFlowsRequest, deliver func(*observer.GetFlowsResponse) bool) error {
	stream, err := n.client().GetFlows(ctx, req)
	for err == nil {
		var r *observer.GetFlowsResponse
		if r, err = stream.Recv(); err == nil {
			if r.GetNodeName() == "" {
				r.NodeName = n.name
			}
			if !deliver(r) {
				return nil
			}
		}
	}
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

// brokenStatus tells that n's stream broke with err.
func brokenStatus(n *node, err error) *observer.GetFlowsResponse {
	state := relaypb.NodeState_NODE_ERROR
	if status.Code(err) == codes.Unavailable {
		state = relaypb.NodeState_NODE_UNAVAILABLE
	}
	return nodeStatus(state, []string{n.name}, status.Convert(err).Message())
}

func respTime(r *observer.GetFlowsResponse) time.Time {
	if t := r.GetTime(); t != nil {
		return t.AsTime()
	}
	return r.GetFlow().GetTime().AsTime()
}

// pending is a followed response waiting in the sort buffer.
type pending struct {
	r       *observer.GetFlowsResponse
	at      time.Time // its time
	arrived time.Time
}

type sortBuffer []pending

func (b sortBuffer) Len() int { return len(b) }
func (b sortBuffer) Less(i, j int) bool {
	return cmp.Or(b[i].at.Compare(b[j].at), b[i].arrived.Compare(b[j].arrived)) < 0
}
func (b sortBuffer) Swap(i, j int) { b[i], b[j] = b[j], b[i] }
func (b *sortBuffer) Push(x any)   { *b = append(*b, x.(pending)) }
func (b *sortBuffer) Pop() any {
	old := *b
	x := old[len(old)-1]
	*b = old[:len(old)-1]
	return x
}

// sendSorted sends what comes in, oldest first: a response leaves the
// buffer when the buffer is full, or when it has waited drainTimeout for
// an older one from a slower node.
func (s *Server) sendSorted(ctx context.Context, in <-chan *observer.GetFlowsResponse, stream grpc.ServerStreamingServer[observer.GetFlowsResponse]) error {
	var buf sortBuffer
	tick := time.NewTicker(max(s.drainTimeout/4, time.Millisecond))
	defer tick.Stop()
	drain := func(now time.Time, all bool) error {
		for buf.Len() > 0 && (all || buf.Len() > s.sortBufferLen || now.Sub(buf[0].arrived) >= s.drainTimeout) {
			if err := stream.Send(heap.Pop(&buf).(pending).r); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case r, ok := <-in:
			if !ok {
				return drain(time.Now(), true)
			}
			now := time.Now()
			heap.Push(&buf, pending{r: r, at: respTime(r), arrived: now})
			if err := drain(now, false); err != nil {
				return err
			}
		case now := <-tick.C:
			if err := drain(now, false); err != nil {
				return err
			}
		}
	}
}

// ask calls every node at once, each within timeout; a node that fails
// has nil.
func ask[T any](ctx context.Context, timeout time.Duration, nodes []*node, call func(context.Context, observer.ObserverClient) (*T, error)) []*T {
	got := make([]*T, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			got[i], _ = call(ctx, n.client())
		})
	}
	wg.Wait()
	return got
}

// statuses asks every connected node for its status; a node that does not
// answer counts as unavailable.
func (s *Server) statuses(ctx context.Context) (map[*node]*observer.ServerStatusResponse, []*node) {
	connected, unavailable := s.pool.split(ctx)
	got := ask(ctx, s.pool.opts.DialTimeout, connected, func(ctx context.Context, c observer.ObserverClient) (*observer.ServerStatusResponse, error) {
		return c.ServerStatus(ctx, &observer.ServerStatusRequest{})
	})
	out := map[*node]*observer.ServerStatusResponse{}
	for i, n := range connected {
		if got[i] == nil {
			unavailable = append(unavailable, n)
			continue
		}
		out[n] = got[i]
	}
	slices.SortFunc(unavailable, func(a, b *node) int { return cmp.Compare(a.name, b.name) })
	return out, unavailable
}

// ServerStatus sums the connected nodes' and names the others.
func (s *Server) ServerStatus(ctx context.Context, _ *observer.ServerStatusRequest) (*observer.ServerStatusResponse, error) {
	ok, unavailable := s.statuses(ctx)
	if len(ok) == 0 && len(unavailable) > 0 {
		return nil, status.Errorf(codes.Unavailable, "no node answers: %v", names(unavailable))
	}
	out := &observer.ServerStatusResponse{Version: s.version,
		NumConnectedNodes: wrapperspb.UInt32(uint32(len(ok))), NumUnavailableNodes: wrapperspb.UInt32(uint32(len(unavailable))),
		UnavailableNodes: names(unavailable)}
	for _, st := range ok {
		out.NumFlows += st.GetNumFlows()
		out.MaxFlows += st.GetMaxFlows()
		out.SeenFlows += st.GetSeenFlows()
		out.FlowsRate += st.GetFlowsRate()
		out.UptimeNs = max(out.UptimeNs, st.GetUptimeNs())
	}
	return out, nil
}

// GetNodes lists every node the Peer service named, with its state.
func (s *Server) GetNodes(ctx context.Context, _ *observer.GetNodesRequest) (*observer.GetNodesResponse, error) {
	ok, unavailable := s.statuses(ctx)
	var out []*observer.Node
	add := func(n *node, state relaypb.NodeState, st *observer.ServerStatusResponse) {
		out = append(out, &observer.Node{Name: n.name, Address: n.address, State: state, Version: st.GetVersion(),
			Tls: &observer.TLS{Enabled: n.serverName != "", ServerName: n.serverName}, UptimeNs: st.GetUptimeNs(),
			NumFlows: st.GetNumFlows(), MaxFlows: st.GetMaxFlows(), SeenFlows: st.GetSeenFlows()})
	}
	for n, st := range ok {
		add(n, relaypb.NodeState_NODE_CONNECTED, st)
	}
	for _, n := range unavailable {
		add(n, relaypb.NodeState_NODE_UNAVAILABLE, nil)
	}
	slices.SortFunc(out, func(a, b *observer.Node) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return &observer.GetNodesResponse{Nodes: out}, nil
}

// GetNamespaces is the union of the connected nodes' namespaces.
func (s *Server) GetNamespaces(ctx context.Context, req *observer.GetNamespacesRequest) (*observer.GetNamespacesResponse, error) {
	connected, _ := s.pool.split(ctx)
	got := ask(ctx, s.pool.opts.DialTimeout, connected, func(ctx context.Context, c observer.ObserverClient) (*observer.GetNamespacesResponse, error) {
		return c.GetNamespaces(ctx, req)
	})
	seen := map[[2]string]*observer.Namespace{}
	for _, r := range got {
		for _, ns := range r.GetNamespaces() {
			seen[[2]string{ns.GetCluster(), ns.GetNamespace()}] = ns
		}
	}
	out := &observer.GetNamespacesResponse{}
	for _, ns := range seen {
		out.Namespaces = append(out.Namespaces, ns)
	}
	slices.SortFunc(out.Namespaces, func(a, b *observer.Namespace) int {
		return cmp.Or(cmp.Compare(a.GetCluster(), b.GetCluster()), cmp.Compare(a.GetNamespace(), b.GetNamespace()))
	})
	return out, nil
}
