package container

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
)

func flowN(n int) Event { return Event{Flow: &flow.Flow{Uuid: fmt.Sprint(n)}} }

func TestCapacityIsHubbles(t *testing.T) {
	for _, c := range []int{0, 2, 4096, 1 << 16} {
		if _, err := NewRing(c); err == nil {
			t.Errorf("capacity %d accepted", c)
		}
	}
	for _, c := range []int{1, 7, 4095, 1<<16 - 1} {
		if r, err := NewRing(c); err != nil || r.Cap() != uint64(c) {
			t.Errorf("capacity %d: %v", c, err)
		}
	}
}

// TestWrapAround: the ring keeps the last Cap() flows; a reader at an
// overwritten position learns how many it lost and where to go on.
func TestWrapAround(t *testing.T) {
	r, _ := NewRing(7)
	for i := range 20 {
		r.Write(flowN(i))
	}
	if r.Len() != 7 || r.Written() != 20 {
		t.Fatalf("len %d written %d", r.Len(), r.Written())
	}
	oldest, next := r.Bounds()
	if oldest != 13 || next != 20 {
		t.Fatalf("bounds %d, %d", oldest, next)
	}
	for p := oldest; p < next; p++ {
		if ev, lost, ok := r.At(p); !ok || lost != 0 || ev.Flow.GetUuid() != fmt.Sprint(p) {
			t.Fatalf("position %d: %v lost %d ok %v", p, ev, lost, ok)
		}
	}
	if _, lost, ok := r.At(5); !ok || lost != 8 {
		t.Fatalf("position 5: lost %d ok %v, want 8 lost", lost, ok)
	}
	if _, _, ok := r.At(20); ok {
		t.Fatal("position 20 was not written")
	}
}

// TestFollowWithSlowReader: a reader waiting for the next position wakes
// for it; one that fell more than Cap() behind is told what it lost.
func TestFollowWithSlowReader(t *testing.T) {
	r, _ := NewRing(3)
	got := make(chan Event)
	go func() {
		if err := r.Wait(context.Background(), 0); err != nil {
			t.Error(err)
		}
		f, _, _ := r.At(0)
		got <- f
	}()
	time.Sleep(10 * time.Millisecond)
	r.Write(flowN(0))
	if f := <-got; f.Flow.GetUuid() != "0" {
		t.Fatalf("woke with %v", f)
	}
	// The slow reader is at 1 while 10 more are written.
	for i := 1; i <= 10; i++ {
		r.Write(flowN(i))
	}
	pos := uint64(1)
	f, lost, _ := r.At(pos)
	if lost != 7 {
		t.Fatalf("slow reader lost %d, want 7", lost)
	}
	pos += lost
	if f, _, _ = r.At(pos); f.Flow.GetUuid() != "8" {
		t.Fatalf("after the loss: %v", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx, 11); err == nil {
		t.Fatal("waited for an unwritten position without end")
	}
}
