package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/api/models"
)

// fakeEvents hands out its events, then blocks until closed, as the ring
// buffer does.
type fakeEvents struct {
	mu     sync.Mutex
	events []spec.Event
	closed chan struct{}
	once   sync.Once
}

func newFakeEvents(evs ...spec.Event) *fakeEvents {
	return &fakeEvents{events: evs, closed: make(chan struct{})}
}

func (f *fakeEvents) Read() (spec.Event, error) {
	f.mu.Lock()
	if len(f.events) > 0 {
		ev := f.events[0]
		f.events = f.events[1:]
		f.mu.Unlock()
		return ev, nil
	}
	f.mu.Unlock()
	<-f.closed
	return spec.Event{}, errors.New("read event: closed")
}

func (f *fakeEvents) SetDeadline(time.Time) {}

func (f *fakeEvents) Close() error { f.once.Do(func() { close(f.closed) }); return nil }

var (
	policyDrop = spec.Event{Type: spec.EventDrop, Reason: spec.DropPolicy, Direction: spec.Ingress,
		Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7"), SrcPort: 40000, DstPort: 8080,
		Protocol: 6, SrcIdentity: 1234, DstIdentity: 5678, DstEndpoint: 12, Ifindex: 7, Length: 60}
	trace = spec.Event{Type: spec.EventTrace, Point: spec.TraceToOverlay,
		Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7"), Protocol: 1, SrcPort: 9,
		SrcIdentity: 1234, DstIdentity: 5678, SrcEndpoint: 3, Ifindex: 4, Length: 84}
	verdict = spec.Event{Type: spec.EventPolicyVerdict, Verdict: spec.VerdictAllow, CT: spec.CTNew,
		Direction: spec.Egress, Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7"),
		SrcPort: 40001, DstPort: 53, Protocol: 17, SrcIdentity: 1234, DstIdentity: 2, Ifindex: 7, Length: 70}
)

func TestMonitorLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keep  []string
		count int
		want  []string
	}{
		{"all", nil, 3, []string{
			"drop (Policy denied) ingress tcp 10.0.1.5:40000 -> 10.0.2.7:8080 identity 1234->5678 endpoint 0->12 ifindex 7 len 60",
			"trace to-overlay icmp 10.0.1.5:9 -> 10.0.2.7 identity 1234->5678 endpoint 3->0 ifindex 4 len 84",
			"policy-verdict allowed egress udp 10.0.1.5:40001 -> 10.0.2.7:53 identity 1234->2 ct new ifindex 7 len 70",
		}},
		{"drops only", []string{"drop"}, 1, []string{
			"drop (Policy denied) ingress tcp 10.0.1.5:40000 -> 10.0.2.7:8080 identity 1234->5678 endpoint 0->12 ifindex 7 len 60",
		}},
		{"verdicts only", []string{"policy-verdict"}, 1, []string{
			"policy-verdict allowed egress udp 10.0.1.5:40001 -> 10.0.2.7:53 identity 1234->2 ct new ifindex 7 len 70",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			o := &options{output: outputTable, out: &out}
			if err := o.monitor(context.Background(), newFakeEvents(policyDrop, trace, verdict), tc.keep, tc.count); err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", out.String(), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestMonitorJSONLines(t *testing.T) {
	var out bytes.Buffer
	o := &options{output: outputJSON, out: &out}
	if err := o.monitor(context.Background(), newFakeEvents(policyDrop, verdict), nil, 2); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var got []models.MonitorEvent
	for dec.More() {
		var v models.MonitorEvent
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []models.MonitorEvent{
		{Type: "drop", Reason: "Policy denied", ReasonCode: 133, Direction: "ingress", Protocol: "tcp", Src: "10.0.1.5",
			SrcPort: 40000, Dst: "10.0.2.7", DstPort: 8080, SrcIdentity: 1234, DstIdentity: 5678, DstEndpoint: 12, Ifindex: 7, Length: 60},
		{Type: "policy-verdict", Verdict: "allowed", CT: "new", Direction: "egress", Protocol: "udp", Src: "10.0.1.5",
			SrcPort: 40001, Dst: "10.0.2.7", DstPort: 53, SrcIdentity: 1234, DstIdentity: 2, Ifindex: 7, Length: 70},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// TestMonitorStopsOnCancel: an interrupt ends a monitor blocked in Read
// without an error.
func TestMonitorStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	o := &options{output: outputTable, out: &out}
	src := newFakeEvents(trace)
	done := make(chan error, 1)
	go func() { done <- o.monitor(ctx, src, nil, 0) }()
	testenv.Eventually(t, 10*time.Second, func() error {
		src.mu.Lock()
		defer src.mu.Unlock()
		if left := len(src.events); left > 0 {
			return fmt.Errorf("monitor did not read the event: %d left", left)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("monitor ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("monitor still running after cancel")
	}
	if !strings.HasPrefix(out.String(), "trace to-overlay") {
		t.Fatalf("output %q", out.String())
	}
}

func TestConnectionViews(t *testing.T) {
	now := 100 * time.Second
	conns := []datapath.Connection{
		{Src: netip.MustParseAddr("10.0.1.6"), Dst: netip.MustParseAddr("10.0.2.7"), SrcPort: 1, DstPort: 80, Protocol: 6,
			Expires: 90 * time.Second, Packets: 3, Bytes: 180},
		{Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7"), SrcPort: 40000, DstPort: 8080, Protocol: 6,
			Expires: 121500 * time.Millisecond, Packets: 10, Bytes: 900, SrcIdentity: 1234, DstIdentity: 5678,
			Tunnel: netip.MustParseAddr("192.168.1.2"), SeenReply: true},
	}
	got := connectionViews(conns, now)
	want := []bpfConnection{
		{Protocol: "tcp", Src: "10.0.1.5", SrcPort: 40000, Dst: "10.0.2.7", DstPort: 8080, ExpiresIn: 21, Packets: 10,
			Bytes: 900, SrcIdentity: 1234, DstIdentity: 5678, Tunnel: "192.168.1.2", SeenReply: true},
		{Protocol: "tcp", Src: "10.0.1.6", SrcPort: 1, Dst: "10.0.2.7", DstPort: 80, ExpiresIn: 0, Packets: 3, Bytes: 180},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if f := ctFlags(got[0]); f != "reply,tunnel=192.168.1.2" {
		t.Fatalf("flags %q", f)
	}
}
