package accesslog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cilium-go/cilium/pkg/unixsock"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
)

// Bounds of what the agent holds for the proxy: a line is one record,
// whose HTTP headers the proxy took from a request (Go's HTTP server
// allows 1 MiB of them); connections are the proxy's, one at a time
// but for the moments a new process starts beside the old one.
const (
	maxLine        = 1 << 20
	maxConnections = 4
	readBuffer     = 64 << 10
)

// SocketFile is the agent's socket for the proxy's records in the proxy's
// directory (pkg/proxy/agent's --proxy-dir), where both find it.
func SocketFile(dir string) string { return filepath.Join(dir, "accesslog.sock") }

// errTooLong reports a line longer than maxLine, skipped whole.
var errTooLong = fmt.Errorf("a line over %d bytes", maxLine)

// Listener is the agent's end of the access log: a unix socket that the
// proxy's Sender connects to.
type Listener struct {
	ln  net.Listener
	log *slog.Logger

	mu    sync.Mutex // held while a record is handled: one at a time
	conns sync.WaitGroup
	slots chan struct{} // one per open connection
}

// Listen opens the socket at path, mode 0660 (root and its group, as the
// agent's other sockets), replacing the file an earlier agent left.
func Listen(path string, log *slog.Logger) (*Listener, error) {
	ln, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("access log socket: %w", err)
	}
	return &Listener{ln: ln, log: log, slots: make(chan struct{}, maxConnections)}, nil
}

// Serve accepts the proxy's connections until ctx ends or Close, and
// calls handle with each record they carry, in the order a connection
// sends them and one call at a time. A line that is no record is logged
// and skipped; handle is what slows a connection down.
func (l *Listener) Serve(ctx context.Context, handle func(Record)) error {
	stop := context.AfterFunc(ctx, func() { l.ln.Close() })
	defer stop()
	defer l.conns.Wait()
	var open sync.Map // the connections, closed when Serve returns
	defer open.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("access log: accept: %w", err)
		}
		select {
		case l.slots <- struct{}{}:
		default:
			l.log.Warn("access log: too many connections, one refused", "limit", maxConnections)
			c.Close()
			continue
		}
		open.Store(c, nil)
		l.conns.Add(1)
		go func() {
			defer func() { open.Delete(c); c.Close(); <-l.slots; l.conns.Done() }()
			l.read(c, handle)
		}()
	}
}

// Close stops Serve.
func (l *Listener) Close() error { return l.ln.Close() }

// read hands the records of one connection to handle until it ends.
// Of its bad lines the first is logged as a warning, the others at
// debug level: a broken sender must not fill the agent's log.
func (l *Listener) read(c net.Conn, handle func(Record)) {
	br := bufio.NewReaderSize(c, readBuffer)
	var line []byte
	bad := 0
	for {
		var err error
		line, err = readLine(br, line)
		if err == nil {
			var r Record
			if r, err = decode(line); err == nil {
				l.mu.Lock()
				handle(r)
				l.mu.Unlock()
				continue
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			break
		}
		if ne := (*net.OpError)(nil); errors.As(err, &ne) {
			l.log.Debug("access log: connection lost", "error", err)
			break
		}
		bad++
		level := slog.LevelDebug
		if bad == 1 {
			level = slog.LevelWarn
		}
		l.log.Log(context.Background(), level, "access log: a line skipped", "error", err)
	}
	if bad > 1 {
		l.log.Warn("access log: lines skipped on a connection", "count", bad)
	}
}

// decode reads the record of a line.
func decode(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, err
	}
	return r, r.check()
}

// readLine reads the next line into buf, without its newline. A line
// longer than maxLine is read to its end and dropped (errTooLong); one
// that the connection's end cuts short is lost with the connection.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	tooLong := false
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong && len(buf)+len(frag) > maxLine+1 {
			tooLong, buf = true, buf[:0]
		}
		if !tooLong {
			buf = append(buf, frag...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return buf, err
		case tooLong:
			return buf, errTooLong
		}
		return buf[:len(buf)-1], nil
	}
}
