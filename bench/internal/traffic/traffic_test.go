package traffic

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echoPipe is a connection whose other end echoes one byte.
func echoPipe() net.Conn {
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		buf := make([]byte, 1)
		if _, err := io.ReadFull(b, buf); err == nil {
			b.Write(buf)
		}
	}()
	return a
}

// A failed connection ends RunCRR, and RunCRRCountingFailures counts it
// apart from the latencies and goes on.
func TestRunCRRFailures(t *testing.T) {
	refused := errors.New("refused")
	flaky := func() Dial {
		n := 0
		return func() (net.Conn, error) {
			n++
			if n%2 == 0 {
				return nil, refused
			}
			return echoPipe(), nil
		}
	}
	if _, err := RunCRR(flaky(), 50*time.Millisecond); !errors.Is(err, refused) {
		t.Errorf("RunCRR went past a failed connection: %v", err)
	}
	r, err := RunCRRCountingFailures(flaky(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed == 0 || len(r.Latencies) == 0 || r.Failed < len(r.Latencies)-1 || r.Failed > len(r.Latencies) {
		t.Errorf("%d connections, %d failed: want every other one failed", len(r.Latencies), r.Failed)
	}
	if len(r.Errors) != min(r.Failed, MaxErrors) || !strings.HasSuffix(r.Errors[0], ": refused") {
		t.Errorf("%d failed, errors kept: %q", r.Failed, r.Errors)
	}
}
