package accesslog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"

	"github.com/cilium-go/cilium/pkg/unixsock"
)

// Bounds of what the agent holds for the proxy: a frame is one record,
// whose HTTP headers the proxy took from a request (Go's HTTP server
// allows 1 MiB of them); connections are the proxy's, one at a time
// but for the moments a new process starts beside the old one.
const (
	maxRecord      = 1 << 20
	maxConnections = 4
	readBuffer     = 64 << 10
)

// SocketFile is the agent's socket for the proxy's records in the proxy's
// directory (pkg/proxy/agent's --proxy-dir), where both find it.
func SocketFile(dir string) string { return filepath.Join(dir, "accesslog.sock") }

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
// sends them and one call at a time. A frame that is no record is logged
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
// A frame that holds no record is skipped; of those the first is
// logged as a warning, the others at debug level: a broken sender must
// not fill the agent's log. A frame that breaks the stream (cut short,
// over maxRecord) ends the connection.
func (l *Listener) read(c net.Conn, handle func(Record)) {
	br := bufio.NewReaderSize(c, readBuffer)
	var msg []byte
	bad := 0
	for {
		var err error
		if msg, err = readFrame(br, msg); err != nil {
			switch ne := (*net.OpError)(nil); {
			case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			case errors.As(err, &ne):
				l.log.Debug("access log: connection lost", "error", err)
			default:
				l.log.Warn("access log: connection dropped", "error", err)
			}
			break
		}
		r, err := decode(msg)
		if err == nil {
			l.mu.Lock()
			handle(r)
			l.mu.Unlock()
			continue
		}
		bad++
		level := slog.LevelDebug
		if bad == 1 {
			level = slog.LevelWarn
		}
		l.log.Log(context.Background(), level, "access log: a record skipped", "error", err)
	}
	if bad > 1 {
		l.log.Warn("access log: records skipped on a connection", "count", bad)
	}
}
