// Package container holds a node's most recent flows in a ring buffer
// that many readers walk at once, each at its own pace: a reader the
// writer laps learns how many flows it missed.
package container

import (
	"context"
	"fmt"
	"math/bits"
	"sync"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
)

// An Event is what the ring holds: a flow, a record of events lost
// before they could become flows, or an agent event (in a ring of its
// own).
type Event struct {
	Flow  *flow.Flow
	Lost  *flow.LostEvent
	Agent *observer.GetAgentEventsResponse
}

// Ring keeps the last Cap() events written. Positions count every flow
// ever written: position p is in slot p mod len(slots) while fewer than
// Cap() flows were written after it.
type Ring struct {
	mu      sync.Mutex
	slots   []Event
	written uint64        // the next write's position
	wake    chan struct{} // closed by the next write
}

// NewRing returns a ring of capacity flows; capacity is 2^n-1 as in
// Hubble (hubble-event-buffer-capacity), from 1 to 2^16-1.
func NewRing(capacity int) (*Ring, error) {
	if err := CheckCapacity(capacity); err != nil {
		return nil, err
	}
	return &Ring{slots: make([]Event, capacity+1), wake: make(chan struct{})}, nil
}

// CheckCapacity fails unless capacity is 2^n-1 between 1 and 65535.
func CheckCapacity(capacity int) error {
	if capacity < 1 || capacity > 1<<16-1 || bits.OnesCount(uint(capacity+1)) != 1 {
		return fmt.Errorf("%d: want 2^n-1 between 1 and 65535", capacity)
	}
	return nil
}

// Cap is how many flows the ring keeps: one fewer than its slots, whose
// number, a power of two, lets a position find its slot by a mask.
func (r *Ring) Cap() uint64 { return uint64(len(r.slots) - 1) }

// Write adds an event, overwriting the oldest once the ring is full.
func (r *Ring) Write(ev Event) {
	r.mu.Lock()
	r.slots[r.written&uint64(len(r.slots)-1)] = ev
	r.written++
	wake := r.wake
	r.wake = make(chan struct{})
	r.mu.Unlock()
	close(wake)
}

// Written is how many events were ever written.
func (r *Ring) Written() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}

// Len is how many events the ring holds.
func (r *Ring) Len() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return min(r.written, r.Cap())
}

// oldest is the position of the oldest flow held; r.mu held.
func (r *Ring) oldest() uint64 {
	if r.written <= r.Cap() {
		return 0
	}
	return r.written - r.Cap()
}

// At is the event at position p, or why there is none: lost is how
// many events from p on were overwritten before they could be read (the
// reader goes on at p+lost), and ok is false when p was not written yet.
func (r *Ring) At(p uint64) (ev Event, lost uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p >= r.written {
		return Event{}, 0, false
	}
	if old := r.oldest(); p < old {
		return Event{}, old - p, true
	}
	return r.slots[p&uint64(len(r.slots)-1)], 0, true
}

// Bounds are the positions of the oldest flow held and of the next
// write.
func (r *Ring) Bounds() (oldest, next uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.oldest(), r.written
}

// Wait blocks until position p is written or ctx ends.
func (r *Ring) Wait(ctx context.Context, p uint64) error {
	for {
		r.mu.Lock()
		written, wake := r.written, r.wake
		r.mu.Unlock()
		if p < written {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
