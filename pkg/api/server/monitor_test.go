package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
)

// fakeMonitor emits its events of the types asked for, then waits for
// the client to go.
type fakeMonitor struct {
	events []models.MonitorEvent
	asked  chan []string
}

func (m *fakeMonitor) Stream(ctx context.Context, types []string, emit func(models.MonitorEvent) error) error {
	m.asked <- types
	for _, ev := range m.events {
		if len(types) > 0 && !slices.Contains(types, ev.Type) {
			continue
		}
		if err := emit(ev); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// TestMonitorStreams: GET /v1/monitor streams events as they come to a
// client on the socket, which stops reading when it has enough.
func TestMonitorStreams(t *testing.T) {
	f := newFixture(t)
	mon := &fakeMonitor{asked: make(chan []string, 1), events: []models.MonitorEvent{
		{Type: "trace", Point: "to-endpoint", Protocol: "tcp"},
		{Type: "drop", Reason: "Policy denied", ReasonCode: 133, Protocol: "tcp", Src: "10.0.1.5", DstPort: 80},
		{Type: "drop", Reason: "invalid packet", ReasonCode: 134, Protocol: "udp"},
	}}
	f.s.p.Monitor = mon
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.s.Handler()}
	go srv.Serve(ln)
	defer srv.Close()

	enough := errors.New("enough")
	var got []models.MonitorEvent
	err = client.New(sock).Monitor(context.Background(), []string{"drop"}, func(ev models.MonitorEvent) error {
		got = append(got, ev)
		if len(got) == 2 {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		t.Fatalf("monitor ended with %v", err)
	}
	if asked := <-mon.asked; !slices.Equal(asked, []string{"drop"}) {
		t.Errorf("asked for %v", asked)
	}
	if got[0] != mon.events[1] || got[1] != mon.events[2] {
		t.Errorf("got %+v", got)
	}

	if code := f.do(t, "GET", "/v1/monitor?type=drop&type=l7", "", nil); code != http.StatusBadRequest {
		t.Errorf("an unknown type: %d, want 400", code)
	}
	f.s.p.Monitor = nil
	if code := f.do(t, "GET", "/v1/monitor", "", nil); code != http.StatusNotImplemented {
		t.Errorf("no monitor: %d, want 501", code)
	}
	if err := client.New(filepath.Join(t.TempDir(), "none.sock")).Monitor(context.Background(), nil,
		func(models.MonitorEvent) error { return nil }); !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("no agent: %v, want ErrUnreachable", err)
	}
}
