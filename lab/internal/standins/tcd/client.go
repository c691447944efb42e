package tcd

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// ClientConfig is what tcd-client is told.
type ClientConfig struct {
	Protocol string
	// Addr is host:port for tcp, a URL for http.
	Addr string
	// Interval between two messages; Timeout: how long the client waits for a
	// reply before it gives up (exits 1).
	Interval time.Duration
	Timeout  time.Duration
	// DialAttempts, one a second, before a tcp client gives up connecting.
	DialAttempts int
}

// MinInterval is what an interval of 0 becomes, as upstream: a message every
// 10ms at most.
const MinInterval = 10 * time.Millisecond

// counters: tx, rx and bytes per second for the log, sent and received in all.
type counters struct{ tx, rx, bytes, sent, received atomic.Uint64 }

func (c *counters) send() { c.tx.Add(1); c.sent.Add(1) }
func (c *counters) receive(n int) {
	c.rx.Add(1)
	c.received.Add(1)
	c.bytes.Add(uint64(n))
}

// Run keeps the connection busy until ctx ends (nil, once every reply is in) or
// something breaks it (an error). ready is called once traffic flows.
func Run(ctx context.Context, cfg ClientConfig, log io.Writer, ready func() error) error {
	if cfg.Interval <= 0 {
		cfg.Interval = MinInterval
		fmt.Fprintln(log, "Zero interval changed to", cfg.Interval, "for backwards compatibility.")
	}
	request := make([]byte, MsgSize)
	rand.Read(request)
	var c counters
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintf(log, "Operations per second: tx %d, rx %d, %dB/s\n", c.tx.Swap(0), c.rx.Swap(0), c.bytes.Swap(0))
			}
		}
	}()
	switch cfg.Protocol {
	case ProtocolTCP:
		return runTCP(ctx, cfg, request, &c, log, ready)
	case ProtocolHTTP:
		return runHTTP(ctx, cfg, request, &c, log, ready)
	}
	return fmt.Errorf("invalid protocol %q (tcp, http)", cfg.Protocol)
}

func dial(ctx context.Context, cfg ClientConfig, log io.Writer) (net.Conn, error) {
	var err error
	for attempt := 0; attempt < max(cfg.DialAttempts, 1); attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		var conn net.Conn
		conn, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", cfg.Addr)
		if err == nil {
			fmt.Fprintf(log, "Connected to %s from %s\n", conn.RemoteAddr(), conn.LocalAddr())
			return conn, nil
		}
		fmt.Fprintf(log, "Failed to connect to %s due to %v. Retrying...\n", cfg.Addr, err)
	}
	return nil, fmt.Errorf("dial remote: %w", err)
}

func runTCP(ctx context.Context, cfg ClientConfig, request []byte, c *counters, log io.Writer, ready func() error) error {
	conn, err := dial(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintln(log, "Sending requests at a target interval of", cfg.Interval, "with timeout of", cfg.Timeout)
	writerDone := make(chan error, 1)
	go func() { writerDone <- writeLoop(ctx, conn, cfg.Interval, request, c) }()
	if err := ready(); err != nil {
		return err
	}
	readErr := readLoop(ctx, conn, cfg.Timeout, request, c, log)
	// A failed read ends the writer too: its next write hits the closed socket.
	conn.Close()
	if werr := <-writerDone; readErr == nil && werr != nil && !errors.Is(werr, net.ErrClosed) {
		return werr
	}
	return readErr
}

func writeLoop(ctx context.Context, conn net.Conn, interval time.Duration, request []byte, c *counters) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := conn.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
			return fmt.Errorf("set write deadline: %w", err)
		}
		if _, err := conn.Write(request); err != nil {
			return fmt.Errorf("conn write: %w", err)
		}
		c.send()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// readLoop checks every reply. On ctx's end it returns once it has every reply
// to what was sent, so that the server sees a clean close rather than a reset.
func readLoop(ctx context.Context, conn net.Conn, timeout time.Duration, request []byte, c *counters, log io.Writer) error {
	last := time.Now()
	reply := make([]byte, MsgSize)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			return fmt.Errorf("set read deadline: %w", err)
		}
		_, err := io.ReadFull(conn, reply)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if ctx.Err() != nil && c.received.Load() >= c.sent.Load() {
				fmt.Fprintln(log, "Reader shutting down")
				return nil
			}
			if time.Since(last) > timeout {
				return fmt.Errorf("no reply received within %v timeout: %w", timeout, err)
			}
			continue
		case errors.Is(err, io.EOF):
			fmt.Fprintln(log, "Server closed the connection")
			return nil
		case err != nil:
			return fmt.Errorf("read reply: %w", err)
		}
		if !bytes.Equal(reply, request) {
			return fmt.Errorf("invalid reply %x to request %x", reply, request)
		}
		last = time.Now()
		c.receive(MsgSize)
	}
}

func runHTTP(ctx context.Context, cfg ClientConfig, request []byte, c *counters, log io.Writer, ready func() error) error {
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 1},
		Timeout:   cfg.Timeout,
	}
	defer client.CloseIdleConnections()
	fmt.Fprintln(log, "Sending requests at a target interval of", cfg.Interval, "with timeout of", cfg.Timeout)
	if err := ready(); err != nil {
		return err
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		req, err := http.NewRequest(http.MethodGet, cfg.Addr, bytes.NewReader(request))
		if err != nil {
			return fmt.Errorf("request %s: %w", cfg.Addr, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("http request failed: %w", err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("response body: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("http request non success status code %d", resp.StatusCode)
		}
		c.send()
		c.receive(int(n))
		select {
		case <-ctx.Done():
			fmt.Fprintln(log, "Client shutting down")
			return nil
		case <-t.C:
		}
	}
}
