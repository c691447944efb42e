// Package observer serves a node's flows through Hubble's Observer gRPC
// service: GetFlows (the last or first flows, a time window, following
// new ones, whitelist and blacklist filters) and ServerStatus.
package observer

import (
	"context"
	"errors"
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
	oldest, next := s.ring.Bounds()
	since := now.Add(-time.Minute)
	n := 0
	for p := next; p > oldest; p-- {
		f, _, ok := s.ring.At(p - 1)
		if !ok || f == nil || f.GetTime().AsTime().Before(since) {
			break
		}
		n++
	}
	return float64(n) / time.Minute.Seconds()
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
	send := func(f *flow.Flow) error {
		return stream.Send(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_Flow{Flow: f},
			NodeName: s.node, Time: f.GetTime()})
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
			f, _, _ := s.ring.At(pos)
			if f != nil && !until.IsZero() && f.GetTime().AsTime().After(until) {
				return nil
			}
			if want(f) {
				if err := send(f); err != nil {
					return err
				}
				sent++
			}
		}
		if number != 0 && sent >= number {
			return nil
		}
	case number > 0:
		// The last number that pass, collected backwards.
		var last []*flow.Flow
		for p := next; p > oldest && uint64(len(last)) < number; p-- {
			f, _, _ := s.ring.At(p - 1)
			if f != nil && !since.IsZero() && f.GetTime().AsTime().Before(since) {
				break
			}
			if want(f) {
				last = append(last, f)
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
	for {
		if err := s.ring.Wait(ctx, pos); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		f, lost, ok := s.ring.At(pos)
		if !ok {
			continue
		}
		if lost > 0 {
			pos += lost
			err := stream.Send(&observer.GetFlowsResponse{ResponseTypes: &observer.GetFlowsResponse_LostEvents{LostEvents: &flow.LostEvent{
				Source: flow.LostEventSource_HUBBLE_RING_BUFFER, NumEventsLost: lost}}, NodeName: s.node, Time: timestamppb.Now()})
			if err != nil {
				return err
			}
			continue
		}
		pos++
		if f != nil && !until.IsZero() && f.GetTime().AsTime().After(until) {
			return nil
		}
		if want(f) {
			if err := send(f); err != nil {
				return err
			}
		}
	}
}
