package monitor

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
)

var drop = spec.Event{Type: spec.EventDrop, Reason: spec.DropPolicy, Direction: spec.Ingress,
	Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7"), SrcPort: 40000, DstPort: 8080,
	Protocol: spec.ProtoTCP, SrcIdentity: 1234, DstIdentity: 5678, DstEndpoint: 12, Ifindex: 7, Length: 60}

var trace = spec.Event{Type: spec.EventTrace, Point: spec.TraceToOverlay, Protocol: spec.ProtoICMP,
	Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7")}

// TestEverySubscriberGetsEveryEvent, and one whose queue is full loses
// events, counted, without holding up the others.
func TestEverySubscriberGetsEveryEvent(t *testing.T) {
	h := NewHub()
	fast, slow := h.Subscribe(10), h.Subscribe(1)
	for range 3 {
		h.Publish(drop)
	}
	ctx := context.Background()
	for range 3 {
		if ev, lost, ok := fast.Next(ctx); !ok || ev != drop || lost != 0 {
			t.Fatalf("fast got %+v, lost %d", ev, lost)
		}
	}
	if ev, lost, ok := slow.Next(ctx); !ok || ev != drop || lost != 2 {
		t.Fatalf("slow got %+v, lost %d; want the first drop, 2 lost", ev, lost)
	}
	if lost := slow.TakeLost(); lost != 0 {
		t.Fatal("losses counted twice")
	}
	slow.Close()
	h.Publish(trace)
	if ev, _, ok := fast.Next(ctx); !ok || ev != trace {
		t.Fatalf("fast got %+v", ev)
	}
	none, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if ev, _, ok := slow.Next(none); ok {
		t.Fatalf("a closed subscription got %+v", ev)
	}
}

// TestStream: the API's stream filters by type and says what it lost.
func TestStream(t *testing.T) {
	h := NewHub()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan models.MonitorEvent, 10)
	done := make(chan error, 1)
	go func() {
		done <- h.Stream(ctx, []string{"drop"}, func(ev models.MonitorEvent) error { got <- ev; return nil })
	}()
	// Publish until the stream's subscription is there.
	deadline := time.Now().Add(10 * time.Second)
	var first models.MonitorEvent
	for first.Type == "" {
		if time.Now().After(deadline) {
			t.Fatal("the stream never subscribed")
		}
		h.Publish(trace)
		h.Publish(drop)
		select {
		case first = <-got:
		case <-time.After(10 * time.Millisecond):
		}
	}
	want := models.MonitorEvent{Type: "drop", Reason: "Policy denied", ReasonCode: 133, Direction: "ingress", Protocol: "tcp",
		Src: "10.0.1.5", SrcPort: 40000, Dst: "10.0.2.7", DstPort: 8080, SrcIdentity: 1234, DstIdentity: 5678, DstEndpoint: 12,
		Ifindex: 7, Length: 60}
	if first != want {
		t.Fatalf("got %+v\nwant %+v", first, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A stream whose reader fails ends with the reader's error.
	failed := errors.New("client gone")
	go func() {
		done <- h.Stream(context.Background(), nil, func(models.MonitorEvent) error { return failed })
	}()
	deadline = time.Now().Add(10 * time.Second)
	for {
		h.Publish(trace)
		select {
		case err := <-done:
			if !errors.Is(err, failed) {
				t.Fatalf("stream ended with %v", err)
			}
			return
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the stream did not end")
			}
		}
	}
}

func TestModelOfVerdicts(t *testing.T) {
	deny := spec.Event{Type: spec.EventPolicyVerdict, Verdict: spec.VerdictDeny, Reason: spec.DropPolicyDeny,
		CT: spec.CTNew, Direction: spec.Egress, Protocol: spec.ProtoUDP}
	m := Model(deny)
	if m.Type != "policy-verdict" || m.Verdict != "denied" || m.Reason != "Policy denied by denylist" || m.ReasonCode != 181 ||
		m.CT != "new" || m.Direction != "egress" || m.Protocol != "udp" || m.Src != "" {
		t.Fatalf("%+v", m)
	}
}
