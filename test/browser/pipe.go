package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// conn speaks the DevTools protocol over --remote-debugging-pipe: JSON
// messages, each ended by a NUL byte, written to Chromium's fd 3 and read
// from its fd 4. One goroutine reads; it hands replies to the call waiting
// for their id and events to the handlers of their method.
type conn struct {
	w      *os.File // our end of Chromium's fd 3
	r      *os.File // our end of Chromium's fd 4
	wmu    sync.Mutex
	lastID atomic.Int64

	// broken turns a read or write error on the pipe into the one calls
	// return: the browser knows whether its process exited, and why.
	broken func(error) error

	mu       sync.Mutex
	pending  map[int64]chan<- reply
	handlers map[string][]*handler
	err      error         // why the connection ended; set before done closes
	done     chan struct{} // closed when no reply can come any more
	readDone chan struct{} // closed when the reader has returned
}

type request struct {
	ID        int64  `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Method    string `json:"method"`
	Params    any    `json:"params,omitempty"`
}

// incoming is a reply (ID set) or an event (Method set).
type incoming struct {
	ID        int64           `json:"id"`
	SessionID string          `json:"sessionId"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *ProtocolError  `json:"error"`
}

type reply struct {
	result json.RawMessage
	err    error
}

// handler is called on the reader's goroutine, so it must not block: a
// slow handler would hold up every reply.
type handler struct {
	fn func(sessionID string, params json.RawMessage)
}

// ProtocolError is Chromium's answer to a command it refused.
type ProtocolError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *ProtocolError) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("%s: %s (%d)", e.Message, e.Data, e.Code)
	}
	return fmt.Sprintf("%s (%d)", e.Message, e.Code)
}

func newConn(w, r *os.File, broken func(error) error) *conn {
	c := &conn{
		w:        w,
		r:        r,
		broken:   broken,
		pending:  map[int64]chan<- reply{},
		handlers: map[string][]*handler{},
		done:     make(chan struct{}),
		readDone: make(chan struct{}),
	}
	go c.read()
	return c
}

func (c *conn) read() {
	defer close(c.readDone)
	// Screenshots arrive as one message of a few MB in base64: a large
	// buffer saves ReadBytes some copying, it does not bound the size.
	br := bufio.NewReaderSize(c.r, 1<<20)
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			c.fail(c.broken(fmt.Errorf("read devtools pipe: %w", err)))
			return
		}
		var m incoming
		if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
			c.fail(fmt.Errorf("decode devtools message: %w", err))
			return
		}
		c.dispatch(&m)
	}
}

func (c *conn) dispatch(m *incoming) {
	if m.ID != 0 {
		c.mu.Lock()
		ch := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ch == nil {
			return // its caller gave up (context done)
		}
		if m.Error != nil {
			ch <- reply{err: m.Error}
		} else {
			ch <- reply{result: m.Result}
		}
		return
	}
	c.mu.Lock()
	hs := c.handlers[m.Method]
	c.mu.Unlock()
	for _, h := range hs {
		h.fn(m.SessionID, m.Params)
	}
}

// fail ends the connection with err; the first error wins.
func (c *conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
}

// failed returns why the connection ended, or nil while it is up.
func (c *conn) failed() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// close ends the connection with err and releases the pipes. Closing our
// read end also unblocks the reader if some process we did not kill
// still holds Chromium's fd 4 open.
func (c *conn) close(err error) {
	c.fail(err)
	c.w.Close()
	c.r.Close()
	<-c.readDone
}

// on registers fn for the events of method and returns what removes it.
func (c *conn) on(method string, fn func(sessionID string, params json.RawMessage)) (off func()) {
	h := &handler{fn: fn}
	c.mu.Lock()
	// Clipped, so that append copies: dispatch may be iterating over the
	// old slice without the lock.
	c.handlers[method] = append(slices.Clip(c.handlers[method]), h)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.handlers[method] = slices.DeleteFunc(slices.Clone(c.handlers[method]), func(x *handler) bool { return x == h })
	}
}

// call sends method with params to the target of sessionID (empty: the
// browser itself) and decodes the reply's result into result, if not nil.
func (c *conn) call(ctx context.Context, sessionID, method string, params, result any) error {
	if err := c.failed(); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	id := c.lastID.Add(1)
	b, err := json.Marshal(request{ID: id, SessionID: sessionID, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	if err := c.write(ctx, append(b, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}

	var r reply
	select {
	case r = <-ch:
	case <-c.done:
		// A reply that came just before the end still counts.
		select {
		case r = <-ch:
		default:
			return fmt.Errorf("%s: %w", method, c.err)
		}
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", method, r.err)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.result, result); err != nil {
		return fmt.Errorf("%s: decode result: %w", method, err)
	}
	return nil
}

// write sends one message. A Chromium that stops reading fills the pipe
// and blocks the write: ctx's deadline bounds it (a cancel without one
// does not). A message cut short leaves the stream unreadable for
// Chromium, so that ends the connection; one not begun does not.
func (c *conn) write(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	n, err := 0, c.w.SetWriteDeadline(deadline)
	if err == nil {
		n, err = c.w.Write(msg)
	}
	switch {
	case err == nil:
		return nil
	case n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
		return context.DeadlineExceeded
	}
	c.fail(c.broken(fmt.Errorf("write devtools pipe: %w", err)))
	return c.failed()
}
