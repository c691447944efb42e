package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// marionette speaks Firefox's Marionette protocol over its TCP socket.
// Every message is its length in bytes (decimal), a colon and JSON: first
// a hello object from Firefox, then [0, id, name, params] commands and
// [1, id, error, result] responses. One goroutine reads and hands each
// response to the call waiting for its id; Firefox sends no events.
type marionette struct {
	nc     net.Conn
	wmu    sync.Mutex
	lastID atomic.Int64

	// broken turns a read or write error into the one calls return: the
	// Firefox knows whether its process exited, and why.
	broken func(error) error

	mu       sync.Mutex
	pending  map[int64]chan<- reply
	err      error         // why the connection ended; set before done closes
	done     chan struct{} // closed when no response can come any more
	readDone chan struct{} // closed when the reader has returned
}

// MarionetteError is Firefox's answer to a command it could not carry
// out: a WebDriver error code ("no such element", "javascript error")
// and a message.
type MarionetteError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *MarionetteError) Error() string { return e.Code + ": " + e.Message }

// maxMessage bounds a message's length as it is announced: a garbled
// prefix must not make the reader allocate gigabytes. Screenshots are the
// largest messages, a few MB.
const maxMessage = 256 << 20

// dialMarionette connects to Firefox on 127.0.0.1:port and reads its
// hello.
func dialMarionette(ctx context.Context, port int, broken func(error) error) (*marionette, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 1<<20)
	// A Firefox that accepts and says nothing must not hold Launch past
	// its context.
	deadline, _ := ctx.Deadline()
	nc.SetReadDeadline(deadline)
	msg, err := readMessage(br)
	nc.SetReadDeadline(time.Time{})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("read marionette hello: %w", err)
	}
	var hello struct {
		ApplicationType string `json:"applicationType"`
		Protocol        int    `json:"marionetteProtocol"`
	}
	if err := json.Unmarshal(msg, &hello); err != nil || hello.ApplicationType != "gecko" || hello.Protocol != 3 {
		nc.Close()
		return nil, fmt.Errorf("marionette hello %s: not gecko's protocol 3", msg)
	}
	m := &marionette{
		nc:       nc,
		broken:   broken,
		pending:  map[int64]chan<- reply{},
		done:     make(chan struct{}),
		readDone: make(chan struct{}),
	}
	go m.read(br)
	return m, nil
}

// readMessage reads one length-prefixed message.
func readMessage(br *bufio.Reader) ([]byte, error) {
	prefix, err := br.ReadSlice(':')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(string(prefix[:len(prefix)-1]))
	if err != nil || n < 0 || n > maxMessage {
		return nil, fmt.Errorf("bad message length %q", prefix)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(br, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func (m *marionette) read(br *bufio.Reader) {
	defer close(m.readDone)
	for {
		msg, err := readMessage(br)
		if err != nil {
			m.fail(m.broken(fmt.Errorf("read marionette: %w", err)))
			return
		}
		var resp []json.RawMessage
		var kind, id int64
		if json.Unmarshal(msg, &resp) != nil || len(resp) != 4 ||
			json.Unmarshal(resp[0], &kind) != nil || kind != 1 || json.Unmarshal(resp[1], &id) != nil {
			m.fail(fmt.Errorf("marionette message %.200s: not a response", msg))
			return
		}
		m.mu.Lock()
		ch := m.pending[id]
		delete(m.pending, id)
		m.mu.Unlock()
		if ch == nil {
			continue // its caller gave up (context done)
		}
		var merr *MarionetteError
		if err := json.Unmarshal(resp[2], &merr); err != nil {
			ch <- reply{err: fmt.Errorf("decode error: %w", err)}
		} else if merr != nil {
			ch <- reply{err: merr}
		} else {
			ch <- reply{result: resp[3]}
		}
	}
}

// fail ends the connection with err; the first error wins.
func (m *marionette) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	m.err = err
	close(m.done)
}

// failed returns why the connection ended, or nil while it is up.
func (m *marionette) failed() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

// close ends the connection with err and waits for the reader.
func (m *marionette) close(err error) {
	m.fail(err)
	m.nc.Close()
	<-m.readDone
}

// call sends the command name with params and decodes the response's
// result into result, if not nil.
func (m *marionette) call(ctx context.Context, name string, params, result any) error {
	if err := m.failed(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if params == nil {
		params = struct{}{} // Marionette wants an object, even an empty one
	}
	id := m.lastID.Add(1)
	body, err := json.Marshal([]any{0, id, name, params})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ch := make(chan reply, 1)
	m.mu.Lock()
	m.pending[id] = ch
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.pending, id)
		m.mu.Unlock()
	}()

	if err := m.write(ctx, append([]byte(strconv.Itoa(len(body))+":"), body...)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var r reply
	select {
	case r = <-ch:
	case <-m.done:
		// A response that came just before the end still counts.
		select {
		case r = <-ch:
		default:
			return fmt.Errorf("%s: %w", name, m.err)
		}
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", name, ctx.Err())
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", name, r.err)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.result, result); err != nil {
		return fmt.Errorf("%s: decode result: %w", name, err)
	}
	return nil
}

// write sends one message, bounded by ctx's deadline. A message cut short
// leaves the stream unreadable for Firefox, so that ends the connection;
// one not begun does not.
func (m *marionette) write(ctx context.Context, msg []byte) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	n, err := 0, m.nc.SetWriteDeadline(deadline)
	if err == nil {
		n, err = m.nc.Write(msg)
	}
	switch {
	case err == nil:
		return nil
	case n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
		return context.DeadlineExceeded
	}
	m.fail(m.broken(fmt.Errorf("write marionette: %w", err)))
	return m.failed()
}
