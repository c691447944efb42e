package netperf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Serve answers test requests on the control listener ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, log io.Writer) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	slots := make(chan struct{}, maxTests)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		select {
		case slots <- struct{}{}:
		default:
			writeAnswer(conn, answer{Error: fmt.Sprintf("netserver busy: %d tests running", maxTests)})
			conn.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer conn.Close()
			if err := handle(ctx, conn); err != nil {
				fmt.Fprintf(log, "netserver: test from %s: %v\n", conn.RemoteAddr(), err)
			}
		}()
	}
}

func writeAnswer(conn net.Conn, a answer) error {
	b, _ := json.Marshal(a)
	_, err := conn.Write(append(b, '\n'))
	return err
}

// readLine reads one JSON line of at most maxLine bytes into v, unknown fields
// refused.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return fmt.Errorf("control message longer than %d bytes", maxLine)
		}
		if !isPrefix {
			break
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("control message: %w", err)
	}
	return nil
}

// handle runs one test: request, data port, the data phase, done, the counts.
func handle(ctx context.Context, conn net.Conn) error {
	r := bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req request
	if err := readLine(r, &req); err != nil {
		writeAnswer(conn, answer{Error: err.Error()})
		return err
	}
	if err := req.validate(); err != nil {
		writeAnswer(conn, answer{Error: err.Error()})
		return err
	}
	peer := conn.RemoteAddr().(*net.TCPAddr).IP
	local := conn.LocalAddr().(*net.TCPAddr).IP
	d, err := openData(req, local, peer)
	if err != nil {
		writeAnswer(conn, answer{Error: err.Error()})
		return err
	}
	defer d.close()
	go d.serve()
	if err := writeAnswer(conn, answer{Port: d.port}); err != nil {
		return err
	}
	// The client says done once its duration is over; a client that does not
	// is cut off.
	conn.SetDeadline(time.Now().Add(req.Duration + 30*time.Second))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var end done
	if err := readLine(r, &end); err != nil {
		return err
	}
	d.finish()
	return writeAnswer(conn, answer{Bytes: d.bytes.Load(), Messages: d.msgs.Load()})
}

// data is the server's end of a test's data path, which only the control
// connection's peer may use.
type data struct {
	req  request
	peer net.IP
	port int
	ln   net.Listener   // TCP tests
	pc   net.PacketConn // UDP tests

	bytes, msgs atomic.Uint64
	last        atomic.Int64 // unix nanoseconds of the last datagram
	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	wg          sync.WaitGroup
	served      chan struct{} // closed when serve returns
}

func openData(req request, local, peer net.IP) (*data, error) {
	d := &data{req: req, peer: peer, conns: map[net.Conn]struct{}{}, served: make(chan struct{})}
	addr := net.JoinHostPort(local.String(), "0")
	var err error
	if isUDP(req.Test) {
		if d.pc, err = net.ListenPacket("udp", addr); err != nil {
			return nil, fmt.Errorf("data socket: %w", err)
		}
		d.port = d.pc.LocalAddr().(*net.UDPAddr).Port
		return d, nil
	}
	if d.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("data socket: %w", err)
	}
	d.port = d.ln.Addr().(*net.TCPAddr).Port
	return d, nil
}

func (d *data) serve() {
	defer close(d.served)
	if d.pc != nil {
		d.serveUDP()
		return
	}
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return
		}
		if !conn.RemoteAddr().(*net.TCPAddr).IP.Equal(d.peer) {
			conn.Close()
			continue
		}
		d.mu.Lock()
		d.conns[conn] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go func() {
			defer d.wg.Done()
			defer func() {
				d.mu.Lock()
				delete(d.conns, conn)
				d.mu.Unlock()
				conn.Close()
			}()
			d.serveTCP(conn)
		}()
	}
}

func (d *data) serveTCP(conn net.Conn) {
	if d.req.Test == TCPStream {
		n, _ := io.Copy(io.Discard, conn)
		d.bytes.Add(uint64(n))
		return
	}
	req, rsp := make([]byte, d.req.ReqSize), make([]byte, d.req.RspSize)
	for {
		if _, err := io.ReadFull(conn, req); err != nil {
			return
		}
		d.bytes.Add(uint64(len(req)))
		d.msgs.Add(1)
		if _, err := conn.Write(rsp); err != nil || d.req.Test == TCPCRR {
			return
		}
	}
}

func (d *data) serveUDP() {
	buf := make([]byte, 65536)
	rsp := make([]byte, d.req.RspSize)
	for {
		n, from, err := d.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if !from.(*net.UDPAddr).IP.Equal(d.peer) {
			continue
		}
		d.bytes.Add(uint64(n))
		d.msgs.Add(1)
		d.last.Store(time.Now().UnixNano())
		if d.req.Test == UDPRR {
			d.pc.WriteTo(rsp, from)
		}
	}
}

// finish stops the data path once what the client sent is in: a TCP stream
// until its sender closes it (5s at most), datagrams until none came for 100ms
// (2s at most).
func (d *data) finish() {
	if d.pc != nil {
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			if time.Since(time.Unix(0, d.last.Load())) > 100*time.Millisecond {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		d.pc.Close()
		return
	}
	d.ln.Close()
	<-d.served // no connection is added after this
	if d.req.Test == TCPStream {
		waited := make(chan struct{})
		go func() { d.wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
		}
	}
	d.closeConns()
	d.wg.Wait()
}

func (d *data) closeConns() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.conns {
		c.Close()
	}
}

func (d *data) close() {
	if d.pc != nil {
		d.pc.Close()
		return
	}
	d.ln.Close()
	d.closeConns()
}
