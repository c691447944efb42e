package relay

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GetAgentEvents asks every connected node for its agent events. Without
// follow, number applies to the whole: the last (or first) number events
// of the cluster in time order; a node holds few (its ring's size), so
// they are gathered whole. Followed events pass on as they come.
func (s *Server) GetAgentEvents(req *observer.GetAgentEventsRequest, stream observer.Observer_GetAgentEventsServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	connected, _ := s.pool.split(ctx)
	in := make(chan *observer.GetAgentEventsResponse, readAhead)
	var wg sync.WaitGroup
	errs := make([]error, len(connected))
	for i, n := range connected {
		wg.Go(func() { errs[i] = agentEventsOf(ctx, n, req, in) })
	}
	go func() {
		wg.Wait()
		close(in)
	}()
	if req.GetFollow() {
		for ev := range in {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		return firstRefusal(errs)
	}
	var all []*observer.GetAgentEventsResponse
	for ev := range in {
		all = append(all, ev)
	}
	if err := firstRefusal(errs); err != nil {
		return err
	}
	slices.SortStableFunc(all, func(a, b *observer.GetAgentEventsResponse) int {
		return cmp.Or(a.GetTime().AsTime().Compare(b.GetTime().AsTime()), cmp.Compare(a.GetNodeName(), b.GetNodeName()))
	})
	if n := req.GetNumber(); n > 0 && uint64(len(all)) > n {
		if req.GetFirst() {
			all = all[:n]
		} else {
			all = all[uint64(len(all))-n:]
		}
	}
	for _, ev := range all {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

// agentEventsOf streams n's agent events into out until its answer or
// ctx ends; it returns a refusal of the request (a bad argument), and
// forgets a node that broke, as the flows' merge reports it.
func agentEventsOf(ctx context.Context, n *node, req *observer.GetAgentEventsRequest, out chan<- *observer.GetAgentEventsResponse) error {
	st, err := n.client().GetAgentEvents(ctx, req)
	for err == nil {
		var ev *observer.GetAgentEventsResponse
		if ev, err = st.Recv(); err == nil {
			if ev.GetNodeName() == "" {
				ev.NodeName = n.name
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
	if status.Code(err) == codes.InvalidArgument {
		return err
	}
	return nil
}

// GetDebugEvents answers as the nodes do: cilium-go's datapath sends no
// debug events; a followed answer stays open until the client leaves.
func (s *Server) GetDebugEvents(req *observer.GetDebugEventsRequest, stream observer.Observer_GetDebugEventsServer) error {
	if req.GetFollow() {
		<-stream.Context().Done()
	}
	return nil
}

func firstRefusal(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
