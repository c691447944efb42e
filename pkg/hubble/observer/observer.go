// Package observer serves a node's flows through Hubble's Observer gRPC
// service: GetFlows (the last or first flows, a time window, following
// new ones, whitelist and blacklist filters, and the records of events
// lost, only the fields of a field mask), GetAgentEvents, GetDebugEvents
// (none), ServerStatus and GetNamespaces.
package observer

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	relaypb "github.com/cilium/cilium/api/v1/relay"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/fieldmask"
	"github.com/cilium-go/cilium/pkg/hubble/filters"
)

// Server answers for one node's ring of flows.
type Server struct {
	observer.UnimplementedObserverServer
	ring        *container.Ring
	agentEvents *container.Ring // nil: none kept
	node        string
	version     string
	started     time.Time
}

// New returns a server of node's flows in ring.
func New(ring *container.Ring, node, version string) *Server {
	return &Server{ring: ring, node: node, version: version, started: time.Now()}
}

// WithAgentEvents serves the agent events in r too.
func (s *Server) WithAgentEvents(r *container.Ring) *Server {
	s.agentEvents = r
	return s
}

// ServerStatus implements observer.ObserverServer.
func (s *Server) ServerStatus(context.Context, *observer.ServerStatusRequest) (*observer.ServerStatusResponse, error) {
	return &observer.ServerStatusResponse{
		NumFlows: s.ring.Len(), MaxFlows: s.ring.Cap(), SeenFlows: s.ring.Written(),
		UptimeNs: uint64(time.Since(s.started)), Version: s.version, FlowsRate: s.rate(time.Now()),
		NumConnectedNodes: wrapperspb.UInt32(1), NumUnavailableNodes: wrapperspb.UInt32(0),
	}, nil
}

// rate is the flows per second of the last minute that the ring holds.
func (s *Server) rate(now time.Time) float64 {
	n := 0
	s.back(now.Add(-time.Minute), func(f *flow.Flow) { n++ })
	return float64(n) / time.Minute.Seconds()
}

// GetNodes implements observer.ObserverServer: the node itself, so that
// `hubble list nodes` answers on a node's socket too (Cilium's node
// servers leave it to the relay).
func (s *Server) GetNodes(context.Context, *observer.GetNodesRequest) (*observer.GetNodesResponse, error) {
	return &observer.GetNodesResponse{Nodes: []*observer.Node{{Name: s.node, Version: s.version, State: relaypb.NodeState_NODE_CONNECTED,
		UptimeNs: uint64(time.Since(s.started)), NumFlows: s.ring.Len(), MaxFlows: s.ring.Cap(), SeenFlows: s.ring.Written()}}}, nil
}

// back calls fn on the ring's flows from the newest back to since.
func (s *Server) back(since time.Time, fn func(*flow.Flow)) {
	oldest, next := s.ring.Bounds()
	for p := next; p > oldest; p-- {
		ev, _, ok := s.ring.At(p - 1)
		if !ok {
			return
		}
		if ev.Flow == nil {
			continue
		}
		if ev.Flow.GetTime().AsTime().Before(since) {
			return
		}
		fn(ev.Flow)
	}
}

// namespaceWindow is how far back GetNamespaces looks, as Hubble's.
const namespaceWindow = time.Hour

// GetNamespaces implements observer.ObserverServer: the namespaces of
// the pods in the last hour's flows that the ring holds, with their
// cluster, as Cilium's.
func (s *Server) GetNamespaces(context.Context, *observer.GetNamespacesRequest) (*observer.GetNamespacesResponse, error) {
	seen := map[[2]string]bool{}
	s.back(time.Now().Add(-namespaceWindow), func(f *flow.Flow) {
		for _, ep := range []*flow.Endpoint{f.GetSource(), f.GetDestination()} {
			if ns := ep.GetNamespace(); ns != "" {
				seen[[2]string{ep.GetClusterName(), ns}] = true
			}
		}
	})
	resp := &observer.GetNamespacesResponse{}
	for _, k := range slices.SortedFunc(maps.Keys(seen), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		resp.Namespaces = append(resp.Namespaces, &observer.Namespace{Cluster: k[0], Namespace: k[1]})
	}
	return resp, nil
}

// GetFlows implements observer.ObserverServer, with Hubble's meaning of
// the request: number flows, the last ones unless first, or all of them
// when number is 0 and nothing is followed; since and until bound their
// times; follow goes on with new flows as they come.
func (s *Server) GetFlows(req *observer.GetFlowsRequest, stream observer.Observer_GetFlowsServer) error {
	mask, err := fieldmask.New(req.GetFieldMask().GetPaths())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	set, err := filters.Compile(req.GetWhitelist(), req.GetBlacklist())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	q, err := newQuery(req.GetNumber(), req.GetFirst(), req.GetFollow(), req.GetSince(), req.GetUntil())
	if err != nil {
		return err
	}
	send := func(ev container.Event) error {
		if ev.Lost != nil {
			return stream.Send(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_LostEvents{LostEvents: ev.Lost},
				NodeName: s.node, Time: ev.Lost.GetLast()})
		}
		// The response's time and node are the whole flow's, whatever
		// the mask: the relay merges by them.
		return stream.Send(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: mask.Apply(ev.Flow)},
			NodeName: s.node, Time: ev.Flow.GetTime()})
	}
	return q.serve(stream.Context(), s.ring, func(ev container.Event) bool { return ev.Flow != nil && set.Pass(ev.Flow) }, send)
}

// GetAgentEvents implements observer.ObserverServer: the agent's events
// (its start, endpoints created and deleted, policies changed), asked
// for as GetFlows asks for flows.
func (s *Server) GetAgentEvents(req *observer.GetAgentEventsRequest, stream observer.Observer_GetAgentEventsServer) error {
	if s.agentEvents == nil {
		return status.Error(codes.Unimplemented, "this server keeps no agent events")
	}
	q, err := newQuery(req.GetNumber(), req.GetFirst(), req.GetFollow(), req.GetSince(), req.GetUntil())
	if err != nil {
		return err
	}
	send := func(ev container.Event) error {
		if ev.Agent == nil {
			return nil // a reader the ring lapped; the API has no record of it
		}
		return stream.Send(ev.Agent)
	}
	return q.serve(stream.Context(), s.agentEvents, func(ev container.Event) bool { return ev.Agent != nil }, send)
}

// GetDebugEvents implements observer.ObserverServer: cilium-go's
// datapath sends no debug events, so the answer is empty; a followed
// one stays open until the client leaves, as Cilium's does when there are
// none.
func (s *Server) GetDebugEvents(req *observer.GetDebugEventsRequest, stream observer.Observer_GetDebugEventsServer) error {
	if _, err := newQuery(req.GetNumber(), req.GetFirst(), req.GetFollow(), req.GetSince(), req.GetUntil()); err != nil {
		return err
	}
	if req.GetFollow() {
		<-stream.Context().Done()
	}
	return nil
}

// query is what GetFlows and GetAgentEvents ask alike.
type query struct {
	number        uint64
	first, follow bool
	since, until  time.Time
}

func newQuery(number uint64, first, follow bool, since, until *timestamppb.Timestamp) (query, error) {
	q := query{number: number, first: first, follow: follow}
	if since != nil {
		q.since = since.AsTime()
	}
	if until != nil {
		q.until = until.AsTime()
	}
	if !q.since.IsZero() && !q.until.IsZero() && q.until.Before(q.since) {
		return q, status.Error(codes.InvalidArgument, "until is before since")
	}
	return q, nil
}

// at is when ev happened; zero for a record of loss.
func at(ev container.Event) time.Time {
	switch {
	case ev.Flow != nil:
		return ev.Flow.GetTime().AsTime()
	case ev.Agent != nil:
		return ev.Agent.GetTime().AsTime()
	}
	return time.Time{}
}

// serve sends the events of ring that q and want select, with the
// records of loss among them.
func (q query) serve(ctx context.Context, ring *container.Ring, want func(container.Event) bool, send func(container.Event) error) error {
	inWindow := func(t time.Time) bool {
		return (q.since.IsZero() || !t.Before(q.since)) && (q.until.IsZero() || !t.After(q.until))
	}
	pass := func(ev container.Event) bool { return ev.Lost == nil && inWindow(at(ev)) && want(ev) }
	oldest, next := ring.Bounds()
	sent := uint64(0)
	// pos is where following goes on from.
	pos := next
	switch {
	case q.first || (q.number == 0 && (!q.follow || !q.since.IsZero())):
		// Forward from the oldest.
		for pos = oldest; pos < next && (q.number == 0 || sent < q.number); pos++ {
			ev, _, _ := ring.At(pos)
			if ev.Lost == nil && !q.until.IsZero() && at(ev).After(q.until) {
				return nil
			}
			if ev.Lost != nil || pass(ev) {
				if err := send(ev); err != nil {
					return err
				}
			}
			if pass(ev) {
				sent++
			}
		}
		if q.number != 0 && sent >= q.number {
			return nil
		}
	case q.number > 0:
		// The last number that pass, collected backwards, with the
		// records of losses among them.
		var last []container.Event
		for p, n := next, uint64(0); p > oldest && n < q.number; p-- {
			ev, _, _ := ring.At(p - 1)
			if ev.Lost == nil && !q.since.IsZero() && at(ev).Before(q.since) {
				break
			}
			if ev.Lost != nil || pass(ev) {
				last = append(last, ev)
			}
			if pass(ev) {
				n++
			}
		}
		for i := len(last) - 1; i >= 0; i-- {
			if err := send(last[i]); err != nil {
				return err
			}
		}
	}
	if !q.follow {
		return nil
	}
	return q.followFrom(ctx, ring, pos, pass, send)
}

// followFrom sends the events from position pos on as they are written,
// until ctx ends or an event comes after until. Where the writer
// overwrote events before they were read, a record says how many.
func (q query) followFrom(ctx context.Context, ring *container.Ring, pos uint64, pass func(container.Event) bool, send func(container.Event) error) error {
	for {
		if err := ring.Wait(ctx, pos); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		ev, n, ok := ring.At(pos)
		if !ok {
			continue
		}
		if n > 0 {
			pos += n
			err := send(container.Event{Lost: &flow.LostEvent{Source: flow.LostEventSource_HUBBLE_RING_BUFFER, NumEventsLost: n,
				Last: timestamppb.Now()}})
			if err != nil {
				return err
			}
			continue
		}
		pos++
		if ev.Lost == nil && !q.until.IsZero() && at(ev).After(q.until) {
			return nil
		}
		if ev.Lost != nil || pass(ev) {
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}
