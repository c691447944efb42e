package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FlowQuery is what the page asks of the relay: one namespace's flows,
// live or between two times.
type FlowQuery struct {
	Namespace string
	// Last asks for that many of the newest flows first (per node, as
	// Hubble's --last with --follow); 0: none.
	Last uint64
	// Since and Until bound a time window; zero Since with zero Until is
	// live from now, a zero Until with a Since is the window up to now
	// and then live.
	Since, Until time.Time
}

// maxLast bounds last: a node's ring holds at most 65,535 flows.
const maxLast = 65535

// ParseFlowQuery reads namespace, last, since and until (RFC 3339) and
// names every bad parameter.
func ParseFlowQuery(v url.Values) (FlowQuery, error) {
	var errs []error
	q := FlowQuery{Namespace: v.Get("namespace")}
	if msgs := validation.IsDNS1123Label(q.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", q.Namespace, msgs[0]))
	}
	if s := v.Get("last"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n < 1 || n > maxLast {
			errs = append(errs, fmt.Errorf("last %q: want a number of flows from 1 to %d", s, maxLast))
		}
		q.Last = n
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-12-05T14:00:00Z", p.name, s))
			continue
		}
		*p.to = t
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		errs = append(errs, fmt.Errorf("until %s is not after since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339)))
	}
	return q, errors.Join(errs...)
}

// Follow says whether the stream stays open for new flows.
func (q FlowQuery) Follow() bool { return q.Until.IsZero() }

// request is the relay's GetFlows for q: the flows that have the
// namespace on either side, a pod, or a Service of it.
func (q FlowQuery) request() *observer.GetFlowsRequest {
	ns := []string{q.Namespace + "/"}
	req := &observer.GetFlowsRequest{
		Number: q.Last,
		Follow: q.Follow(),
		Whitelist: []*flow.FlowFilter{
			{SourcePod: ns}, {DestinationPod: ns}, {DestinationService: ns},
		},
	}
	if !q.Since.IsZero() {
		req.Since = timestamppb.New(q.Since)
	} else if !q.Follow() {
		// A window without a start: as much as the rings hold.
		req.Since = timestamppb.New(time.Unix(0, 0))
	}
	if !q.Until.IsZero() {
		req.Until = timestamppb.New(q.Until)
	}
	return req
}

// Batching of the flows sent to the page: a batch leaves when it holds
// maxBatch responses or when batchDelay has passed since its first. A
// quiet cluster costs the page a message a tenth of a second at most; a
// busy one messages small enough that parsing one never takes a frame.
const (
	maxBatch   = 250
	batchDelay = 100 * time.Millisecond
)

// jsonFlow is a GetFlowsResponse as the exporter writes it, so that the
// page reads a live stream and a replayed export file alike.
var jsonFlow = protojson.MarshalOptions{UseProtoNames: true}

// streamFlows sends q's flows from the relay to send, in batches of JSON
// GetFlowsResponses, until the relay ends the stream (a window), ctx
// ends or send fails.
func streamFlows(ctx context.Context, relay observer.ObserverClient, q FlowQuery, send func([][]byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := relay.GetFlows(ctx, q.request())
	if err != nil {
		return fmt.Errorf("relay GetFlows: %w", err)
	}
	// A receiver goroutine, so that a batch leaves on time while the
	// relay is quiet.
	type received struct {
		b   []byte
		err error
	}
	in := make(chan received, maxBatch)
	go func() {
		defer close(in)
		for {
			resp, err := stream.Recv()
			var r received
			if err == nil {
				r.b, err = jsonFlow.Marshal(resp)
			}
			r.err = err
			select {
			case in <- r:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var (
		batch [][]byte
		timer = time.NewTimer(batchDelay)
		armed bool
	)
	defer timer.Stop()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := send(batch)
		batch = nil
		return err
	}
	for {
		select {
		case r, ok := <-in:
			if !ok {
				return ctx.Err()
			}
			if r.err != nil {
				if ferr := flush(); ferr != nil {
					return ferr
				}
				if errors.Is(r.err, io.EOF) {
					return nil
				}
				return fmt.Errorf("relay GetFlows: %w", r.err)
			}
			batch = append(batch, r.b)
			if len(batch) >= maxBatch {
				if err := flush(); err != nil {
					return err
				}
				continue
			}
			if !armed {
				timer.Reset(batchDelay)
				armed = true
			}
		case <-timer.C:
			armed = false
			if err := flush(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
