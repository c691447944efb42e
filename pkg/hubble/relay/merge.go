package relay

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readAhead is how many responses of one node wait for the merge. A
// little lets the nodes' streams and the client's run side by side; the
// relay holds at most this many per node, whatever the answer's size.
const readAhead = 16

// item is one step of a node's answer: a response, or the error that
// refuses the whole request.
type item struct {
	r   *observer.GetFlowsResponse
	err error
}

// readNode streams n's answer to a request that does not follow into out
// and closes it. A broken stream ends with a node status, as in the
// followed answer; a refused request (InvalidArgument, a bad filter)
// ends with its error, since every node refuses it alike.
func readNode(ctx context.Context, n *node, req *observer.GetFlowsRequest, out chan<- item) {
	defer close(out)
	put := func(it item) bool {
		select {
		case out <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	err := askNode(ctx, n, req, func(r *observer.GetFlowsResponse) bool { return put(item{r: r}) })
	switch {
	case status.Code(err) == codes.InvalidArgument:
		put(item{err: err})
	case err != nil:
		put(item{r: brokenStatus(n, err)})
	}
}

// head is the oldest response of one node that is not sent yet.
type head struct {
	r   *observer.GetFlowsResponse
	at  time.Time
	src int // the node's position, which orders responses of the same time
}

type heads []head

func (h heads) Len() int { return len(h) }
func (h heads) Less(i, j int) bool {
	return cmp.Or(h[i].at.Compare(h[j].at), cmp.Compare(h[i].src, h[j].src)) < 0
}
func (h heads) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *heads) Push(x any)   { *h = append(*h, x.(head)) }
func (h *heads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// errEnough ends a merge that has given all that was asked for.
var errEnough = errors.New("enough")

// merge gives emit the nodes' answers to req, which does not follow, in
// time order as they come: every node answers oldest first, so the
// oldest unsent response is always one of the nodes' heads. It holds one
// head and readAhead responses per node, never a whole answer. It stops
// at ctx's end, at emit's first error (errEnough: without error), or
// with the first node's refusal of the request.
func merge(ctx context.Context, nodes []*node, req *observer.GetFlowsRequest, emit func(*observer.GetFlowsResponse) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	streams := make([]chan item, len(nodes))
	for i, n := range nodes {
		streams[i] = make(chan item, readAhead)
		wg.Go(func() { readNode(ctx, n, req, streams[i]) })
	}
	h := make(heads, 0, len(nodes))
	// next puts node i's next response among the heads.
	next := func(i int) error {
		select {
		case it, ok := <-streams[i]:
			switch {
			case !ok:
			case it.err != nil:
				return it.err
			default:
				heap.Push(&h, head{r: it.r, at: respTime(it.r), src: i})
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range streams {
		if err := next(i); err != nil {
			return err
		}
	}
	for h.Len() > 0 {
		x := heap.Pop(&h).(head)
		if err := emit(x.r); err != nil {
			if errors.Is(err, errEnough) {
				return nil
			}
			return err
		}
		if err := next(x.src); err != nil {
			return err
		}
	}
	return nil
}

// tail keeps the end of a merged answer: the last n flows, with the
// node statuses and records of loss between and after them. It holds at
// most n flows, and what is not a flow only after the oldest of them
// (at most a status per node and the nodes' records of loss).
type tail struct {
	n     uint64
	flows uint64
	q     []*observer.GetFlowsResponse
}

func (t *tail) add(r *observer.GetFlowsResponse) error {
	t.q = append(t.q, r)
	if r.GetFlow() != nil {
		t.flows++
	}
	// With n flows kept, the answer starts at the oldest of them.
	for len(t.q) > 0 && (t.flows > t.n || (t.flows == t.n && t.q[0].GetFlow() == nil)) {
		if t.q[0].GetFlow() != nil {
			t.flows--
		}
		// The slice's front is dropped; append copies what is kept into
		// a new array when it grows, so the memory follows the length.
		t.q[0] = nil
		t.q = t.q[1:]
	}
	return nil
}

// first passes on responses until n flows went.
type first struct {
	n, flows uint64
	send     func(*observer.GetFlowsResponse) error
}

func (f *first) add(r *observer.GetFlowsResponse) error {
	if err := f.send(r); err != nil {
		return err
	}
	if r.GetFlow() != nil {
		if f.flows++; f.flows == f.n {
			return errEnough
		}
	}
	return nil
}

// sendMerged answers a request that does not follow: number applies to
// the merge, the last (or first) number flows of the cluster.
func sendMerged(ctx context.Context, nodes []*node, req *observer.GetFlowsRequest, send func(*observer.GetFlowsResponse) error) error {
	n := req.GetNumber()
	switch {
	case n == 0:
		return merge(ctx, nodes, req, send)
	case req.GetFirst():
		return merge(ctx, nodes, req, (&first{n: n, send: send}).add)
	}
	t := &tail{n: n}
	if err := merge(ctx, nodes, req, t.add); err != nil {
		return err
	}
	for _, r := range t.q {
		if err := send(r); err != nil {
			return err
		}
	}
	return nil
}
