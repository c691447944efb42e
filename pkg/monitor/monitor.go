// Package monitor is the agent's reader of the datapath's events. The
// node's event ring buffer has one consumer position, so two readers
// would split the events between them: the agent reads it alone and
// hands every event to each subscriber (Hubble, the API's GET
// /v1/monitor), each with a queue of its own. A subscriber that falls
// behind loses events, counted, and never slows the others.
package monitor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/health"
)

// Cell reads the node's events into a *Hub.
var Cell = cell.Module("monitor", "The datapath events read once and fanned out",
	health.JobGroup,
	cell.Provide(NewHub, func(h *Hub) server.Monitor { return h }),
	cell.Invoke(registerReader),
)

// Hub hands events to its subscribers.
type Hub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewHub returns a hub with no subscribers.
func NewHub() *Hub { return &Hub{subs: map[*Subscription]struct{}{}} }

// Subscription is one reader's queue.
type Subscription struct {
	hub *Hub
	c   chan []spec.Event
	// size bounds the events queued, which queued counts.
	size   int
	queued atomic.Int64
	cur    []spec.Event // the batch Next is handing out
	mu     sync.Mutex
	lost   uint64
}

// Subscribe adds a reader with a queue of size events.
func (h *Hub) Subscribe(size int) *Subscription {
	size = max(size, 1)
	s := &Subscription{hub: h, c: make(chan []spec.Event, size), size: size}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// TakeLost returns how many events the queue had no room for since the
// last call.
func (s *Subscription) TakeLost() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.lost
	s.lost = 0
	return n
}

// Next waits for the next event; lost is how many events the queue had
// no room for before it. ok is false once ctx ended.
func (s *Subscription) Next(ctx context.Context) (ev spec.Event, lost uint64, ok bool) {
	if len(s.cur) == 0 {
		select {
		case <-ctx.Done():
			return ev, 0, false
		case s.cur = <-s.c:
			s.queued.Add(-int64(len(s.cur)))
		}
	}
	ev, s.cur = s.cur[0], s.cur[1:]
	return ev, s.TakeLost(), true
}

// Close removes the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
}

// Publish queues evs, a batch that no one changes after, for every
// subscriber, without waiting for any: a subscriber with no room for
// them loses them all.
func (h *Hub) Publish(evs ...spec.Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.queued.Load()+int64(len(evs)) <= int64(s.size) {
			select {
			case s.c <- evs:
				s.queued.Add(int64(len(evs)))
				continue
			default:
			}
		}
		s.mu.Lock()
		s.lost += uint64(len(evs))
		s.mu.Unlock()
	}
}

// readBatch is the most events Read hands on at once.
const readBatch = 256

func registerReader(jobs job.Group, n *datapath.Node, h *Hub) {
	jobs.Add(job.OneShot("monitor-events", func(ctx context.Context, _ cell.Health) error {
		m := n.Maps()
		if m == nil {
			return errors.New("the datapath has no maps open")
		}
		return h.Read(ctx, m)
	}))
}

// Read publishes the events of the datapath's maps until ctx ends: the
// agent's monitor job; nothing else may read the node's events beside it.
func (h *Hub) Read(ctx context.Context, m *datapath.Maps) error {
	r, err := m.NewEventReader()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer func() {
		if stop() {
			r.Close()
		}
	}()
	for {
		evs, err := r.ReadBatch(readBatch)
		if len(evs) > 0 {
			h.Publish(evs...)
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, datapath.ErrNoEvent):
		default:
			return err
		}
	}
}

// Clock reads the wall clock and the clock the datapath stamps its
// events with (the kernel's CLOCK_MONOTONIC) together: what a reader of
// events needs to date them.
func Clock() (time.Time, time.Duration, error) {
	mono, err := datapath.Monotonic()
	return time.Now(), mono, err
}

// streamQueue is the queue of an API reader.
const streamQueue = 4096

// Stream implements server.Monitor: every event of types (all when
// empty), and a record of the events lost before it, until ctx ends.
func (h *Hub) Stream(ctx context.Context, types []string, emit func(models.MonitorEvent) error) error {
	sub := h.Subscribe(streamQueue)
	defer sub.Close()
	for {
		ev, lost, ok := sub.Next(ctx)
		if !ok {
			return nil
		}
		if lost > 0 {
			if err := emit(models.MonitorEvent{Type: "lost", Lost: lost}); err != nil {
				return err
			}
		}
		m := Model(ev)
		if len(types) > 0 && !slices.Contains(types, m.Type) {
			continue
		}
		if err := emit(m); err != nil {
			return err
		}
	}
}

// Model is an event as the API shows it.
func Model(ev spec.Event) models.MonitorEvent {
	m := models.MonitorEvent{Type: ev.Type.String(), Protocol: spec.ProtoString(ev.Protocol), SrcPort: ev.SrcPort,
		DstPort: ev.DstPort, SrcIdentity: ev.SrcIdentity, DstIdentity: ev.DstIdentity, SrcEndpoint: ev.SrcEndpoint,
		DstEndpoint: ev.DstEndpoint, Ifindex: ev.Ifindex, Length: ev.Length}
	if ev.Src.IsValid() {
		m.Src = ev.Src.String()
	}
	if ev.Dst.IsValid() {
		m.Dst = ev.Dst.String()
	}
	if ev.Direction != 0 {
		m.Direction = ev.Direction.String()
	}
	switch ev.Type {
	case spec.EventTrace:
		m.Point = ev.Point.String()
	case spec.EventDrop:
		m.Reason, m.ReasonCode = ev.Reason.String(), uint8(ev.Reason)
	case spec.EventPolicyVerdict:
		m.Verdict, m.CT = ev.Verdict.String(), ev.CT.String()
		if ev.Verdict == spec.VerdictDeny {
			m.Reason, m.ReasonCode = ev.Reason.String(), uint8(ev.Reason)
		}
	}
	return m
}
