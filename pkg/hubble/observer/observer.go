// Package observer serves a node's flows through Hubble's Observer gRPC
// service: GetFlows (the last or first flows, a time window, following
// new ones, whitelist and blacklist filters, and the records of events
// lost), ServerStatus and GetNamespaces.
package observer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/filters"
)

// Server answers for one node's ring of flows.
type Server struct {
	observer.UnimplementedObserverServer
	ring    *container.Ring
	node    string
	version string
	started time.Time
}

// New returns a server of node's flows in ring.
func New(ring *container.Ring, node, version string) *Server {
	return &Server{ring: ring, node: node, version: version, started: time.Now()}
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
// the pods in the last hour's flows that the ring holds.
func (s *Server) GetNamespaces(context.Context, *observer.GetNamespacesRequest) (*observer.GetNamespacesResponse, error) {
	seen := map[string]bool{}
	s.back(time.Now().Add(-namespaceWindow), func(f *flow.Flow) {
		for _, ep := range []*flow.Endpoint{f.GetSource(), f.GetDestination()} {
			if ns := ep.GetNamespace(); ns != "" {
				seen[ns] = true
			}
		}
	})
	resp := &observer.GetNamespacesResponse{}
	for _, ns := range slices.Sorted(maps.Keys(seen)) {
		resp.Namespaces = append(resp.Namespaces, &observer.Namespace{Namespace: ns})
	}
	return resp, nil
}

// GetFlows implements observer.ObserverServer, with Hubble's meaning of
// the request: number flows, the last ones unless first, or all of them
// when number is 0 and nothing is followed; since and until bound their
// times; follow goes on with new flows as they come.
func (s *Server) GetFlows(req *observer.GetFlowsRequest, stream observer.Observer_GetFlowsServer) error {
	if len(req.GetFieldMask().GetPaths()) > 0 {
		return status.Error(codes.InvalidArgument, "field_mask: cilium-go sends whole flows")
	}
	set, err := filters.Compile(req.GetWhitelist(), req.GetBlacklist())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	var since, until time.Time
	if req.GetSince() != nil {
		since = req.GetSince().AsTime()
	}
	if req.GetUntil() != nil {
		until = req.GetUntil().AsTime()
	}
	if !since.IsZero() && !until.IsZero() && until.Before(since) {
		return status.Error(codes.InvalidArgument, "until is before since")
	}
	inWindow := func(f *flow.Flow) bool {
		t := f.GetTime().AsTime()
		return (since.IsZero() || !t.Before(since)) && (until.IsZero() || !t.After(until))
	}
	want := func(f *flow.Flow) bool { return f != nil && inWindow(f) && set.Pass(f) }
	send := func(ev container.Event) error {
		if ev.Lost != nil {
			return stream.Send(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_LostEvents{LostEvents: ev.Lost},
				NodeName: s.node, Time: ev.Lost.GetLast()})
		}
		return stream.Send(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: ev.Flow},
			NodeName: s.node, Time: ev.Flow.GetTime()})
	}
	ctx := stream.Context()
	oldest, next := s.ring.Bounds()
	number := req.GetNumber()
	sent := uint64(0)
	// pos is where following goes on from.
	pos := next
	switch {
	case req.GetFirst() || (number == 0 && (!req.GetFollow() || !since.IsZero())):
		// Forward from the oldest.
		for pos = oldest; pos < next && (number == 0 || sent < number); pos++ {
			ev, _, _ := s.ring.At(pos)
			f := ev.Flow
			if f != nil && !until.IsZero() && f.GetTime().AsTime().After(until) {
				return nil
			}
			if ev.Lost != nil || want(f) {
				if err := send(ev); err != nil {
					return err
				}
			}
			if want(f) {
				sent++
			}
		}
		if number != 0 && sent >= number {
			return nil
		}
	case number > 0:
		// The last number that pass, collected backwards, with the
		// records of losses among them.
		var last []container.Event
		for p, n := next, uint64(0); p > oldest && n < number; p-- {
			ev, _, _ := s.ring.At(p - 1)
			f := ev.Flow
			if f != nil && !since.IsZero() && f.GetTime().AsTime().Before(since) {
				break
			}
			if ev.Lost != nil || want(f) {
				last = append(last, ev)
			}
			if want(f) {
				n++
			}
		}
		for i := len(last) - 1; i >= 0; i-- {
			if err := send(last[i]); err != nil {
				return err
			}
		}
	}
	if !req.GetFollow() {
		return nil
	}
	return s.follow(ctx, pos, until, want, send)
}

// follow sends the events from position pos on as they are written,
// until ctx ends or a flow comes after until. Where the writer overwrote
// events before they were read, a record says how many.
func (s *Server) follow(ctx context.Context, pos uint64, until time.Time, want func(*flow.Flow) bool, send func(container.Event) error) error {
	for {
		if err := s.ring.Wait(ctx, pos); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		ev, n, ok := s.ring.At(pos)
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
		if f := ev.Flow; f != nil && !until.IsZero() && f.GetTime().AsTime().After(until) {
			return nil
		}
		if ev.Lost != nil || want(ev.Flow) {
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}
