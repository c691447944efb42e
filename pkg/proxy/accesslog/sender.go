package accesslog

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// DefaultQueue is how many records a Sender holds for the agent: a few
// seconds of a busy node's DNS.
const DefaultQueue = 4096

// batchWait is how long a Sender gathers records before it writes them.
const batchWait = 2 * time.Millisecond

// How soon a Sender tries the agent's socket again: soon after a
// restart, then less often while the agent stays away.
const (
	minRetry = 50 * time.Millisecond
	maxRetry = 2 * time.Second
)

// Sender is the proxy's end of the access log. Record never waits: while
// the agent is away, or reads slower than the proxy records, records are
// dropped and counted, so that an agent's restart holds no DNS answer
// nor HTTP request up.
type Sender struct {
	path      string
	log       *slog.Logger
	queue     chan Record
	connected atomic.Bool
	dropped   atomic.Uint64
}

// NewSender returns a sender to the agent's socket at path that holds
// queue records at most (DefaultQueue if 0); Run connects it.
func NewSender(path string, queue int, log *slog.Logger) *Sender {
	if queue <= 0 {
		queue = DefaultQueue
	}
	return &Sender{path: path, log: log, queue: make(chan Record, queue)}
}

// Record sends r to the agent, or drops it if the agent is not connected
// or the queue is full.
func (s *Sender) Record(r Record) {
	if !s.connected.Load() {
		s.dropped.Add(1)
		return
	}
	select {
	case s.queue <- r:
	default:
		s.dropped.Add(1)
	}
}

// Dropped is how many records did not reach the agent's socket.
func (s *Sender) Dropped() uint64 { return s.dropped.Load() }

// Connected says whether records go to the agent now.
func (s *Sender) Connected() bool { return s.connected.Load() }

// Run connects to the agent and writes the records to it until ctx
// ends, connecting again whenever the agent goes away.
func (s *Sender) Run(ctx context.Context) error {
	retry := minRetry
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", s.path)
		if err == nil {
			retry = minRetry
			s.log.Info("access log: connected to the agent", "socket", s.path)
			err = s.send(ctx, c)
			if ctx.Err() == nil {
				s.log.Info("access log: the agent went away", "error", err, "dropped", s.Dropped())
			}
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		retry = min(2*retry, maxRetry)
	}
}

// send writes the queue to c until c fails or ctx ends.
func (s *Sender) send(ctx context.Context, c net.Conn) error {
	// The agent never writes: a read ends when it closes the connection,
	// which tells a quiet proxy that it went away.
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(gone)
	}()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// A record that came as the last connection ended is stale.
	s.drain()
	s.connected.Store(true)
	// What is queued or buffered when c fails is dropped: records are
	// not worth keeping for an agent that may not come back soon.
	pending := uint64(0) // records written to w since its last flush
	defer func() {
		s.connected.Store(false)
		c.Close()
		s.dropped.Add(pending)
		s.drain()
	}()
	w := bufio.NewWriterSize(c, 64<<10)
	var enc encoder
	var frame []byte
	write := func(r Record) error {
		var ok bool
		if frame, ok = enc.appendFrame(frame[:0], &r); !ok {
			s.dropped.Add(1)
			return nil
		}
		pending++
		_, err := w.Write(frame)
		return err
	}
	batch := time.NewTimer(batchWait)
	batch.Stop()
	for {
		// The first record after a quiet time wakes the sender; those
		// that come in the next batchWait wait in the queue, so that a
		// busy proxy writes to the agent once in batchWait, not once a
		// record.
		select {
		case r := <-s.queue:
			if err := write(r); err != nil {
				return err
			}
		case <-gone:
			return io.EOF
		case <-ctx.Done():
			return ctx.Err()
		}
		batch.Reset(batchWait)
		select {
		case <-batch.C:
		case <-gone:
			return io.EOF
		case <-ctx.Done():
			return ctx.Err()
		}
		for queued := len(s.queue); queued > 0; queued-- {
			if err := write(<-s.queue); err != nil {
				return err
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		pending = 0
	}
}

func (s *Sender) drain() {
	for {
		select {
		case <-s.queue:
			s.dropped.Add(1)
		default:
			return
		}
	}
}
