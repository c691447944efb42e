// Package traffic holds the TCP load the benchmarks under bench/ measure
// with: servers in a destination namespace (a sink that counts what it
// receives, for a stream, and a one-byte echo), a stream's rate,
// request/response on one connection, and connect/request/close with
// each connection's latency.
package traffic

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Servers run in a destination namespace: a sink that counts what it
// receives, for the stream, and a one-byte echo for the others.
type Servers struct {
	sink, echo net.Listener
	received   atomic.Int64
}

// StartServers listens at addr in ns: the sink on streamPort, the echo on
// echoPort.
func StartServers(ns string, addr netip.Addr, streamPort, echoPort int) (*Servers, error) {
	s := &Servers{}
	var err error
	if s.sink, err = dptest.ListenTCP(ns, addr, streamPort); err != nil {
		return nil, err
	}
	if s.echo, err = dptest.ListenTCP(ns, addr, echoPort); err != nil {
		s.sink.Close()
		return nil, err
	}
	go accept(s.sink, func(c net.Conn) {
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			s.received.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	go accept(s.echo, func(c net.Conn) {
		buf := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	return s, nil
}

// Received is what the sink has received so far, in bytes.
func (s *Servers) Received() int64 { return s.received.Load() }

// Close stops listening; connections under way end with their clients.
func (s *Servers) Close() error {
	return errors.Join(s.sink.Close(), s.echo.Close())
}

func accept(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// TuneClient lets connect/request/close from ns reuse ports in TIME_WAIT,
// so that its rate measures the datapath and not the ephemeral port
// range.
func TuneClient(ns string) error {
	return netnamespace.Do(ns, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/tcp_tw_reuse", []byte("1"), 0o644)
	})
}

// Dial opens one connection to the server under test.
type Dial func() (net.Conn, error)

// DialFrom dials dst from the namespace ns, entering it for each
// connection.
func DialFrom(ns string, dst netip.AddrPort) Dial {
	return func() (net.Conn, error) {
		return dptest.DialTCP(ns, dst.Addr(), int(dst.Port()), dptest.ReplyWait)
	}
}

// StreamRate is what received counted, in Mbit/s, while one connection
// wrote for d.
func StreamRate(dial Dial, received func() int64, d time.Duration) (float64, error) {
	c, err := dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 128<<10)
	// Warm up the congestion window before counting.
	warm := time.Now().Add(d / 10)
	for time.Now().Before(warm) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	start, t0 := received(), time.Now()
	for time.Since(t0) < d {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	got, el := received()-start, time.Since(t0)
	return float64(got) * 8 / el.Seconds() / 1e6, nil
}

func exchange(c net.Conn, b []byte) error {
	if _, err := c.Write(b); err != nil {
		return err
	}
	_, err := io.ReadFull(c, b)
	return err
}

// RRRate is one-byte round trips per second on one connection.
func RRRate(dial Dial, d time.Duration) (float64, error) {
	c, err := dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	b := []byte{1}
	n, t0 := 0, time.Now()
	for time.Since(t0) < d {
		if err := exchange(c, b); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// CRR connects, makes a one-byte round trip and closes, again and again
// for d. Latencies holds each connection's connect and round trip (not
// its close); Elapsed is the whole loop's time; Failed counts the
// connections that failed, when the loop goes on past them, and Errors
// holds the first MaxErrors of their errors.
type CRR struct {
	Latencies []time.Duration
	Elapsed   time.Duration
	Failed    int
	Errors    []string
}

// MaxErrors is how many failures' errors a CRR keeps.
const MaxErrors = 5

// Rate is connections per second.
func (r CRR) Rate() float64 { return float64(len(r.Latencies)) / r.Elapsed.Seconds() }

// RunCRR runs connect/request/close on dial for d; a connection that
// fails ends it.
func RunCRR(dial Dial, d time.Duration) (CRR, error) { return runCRR(dial, d, false) }

// RunCRRCountingFailures is RunCRR that counts a failed connection and
// goes on.
func RunCRRCountingFailures(dial Dial, d time.Duration) (CRR, error) { return runCRR(dial, d, true) }

func runCRR(dial Dial, d time.Duration, countFailures bool) (CRR, error) {
	b := []byte{1}
	var r CRR
	t0 := time.Now()
	for {
		start := time.Now()
		if start.Sub(t0) >= d {
			break
		}
		var lat time.Duration
		c, err := dial()
		if err == nil {
			// A connection that goes silent fails instead of hanging.
			c.SetDeadline(start.Add(dptest.ReplyWait))
			err = exchange(c, b)
			lat = time.Since(start)
			c.Close()
		}
		switch {
		case err != nil && countFailures:
			r.Failed++
			if len(r.Errors) < MaxErrors {
				r.Errors = append(r.Errors, fmt.Sprintf("after %v: %v", time.Since(start).Round(time.Millisecond), err))
			}
		case err != nil:
			return r, fmt.Errorf("connection %d: %w", len(r.Latencies), err)
		default:
			r.Latencies = append(r.Latencies, lat)
		}
	}
	r.Elapsed = time.Since(t0)
	return r, nil
}
