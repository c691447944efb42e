package netperf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Config is one netperf run.
type Config struct {
	Host     string
	Port     int
	Test     string
	Duration time.Duration
	ReqSize  int
	RspSize  int
	MsgSize  int
	// Network is "tcp", "tcp4" or "tcp6" (-4, -6) for the control connection;
	// the data path follows its family.
	Network string
}

// Result is what a run measured. Latencies are per transaction, for the
// request/response tests.
type Result struct {
	Test         string
	Elapsed      time.Duration
	Transactions uint64
	Lost         uint64 // UDP_RR requests that got no response within a second
	Latency      histogram
	// Sent is what the client sent; Received what the server got.
	Sent, Received uint64
}

// TransactionRate is transactions (request/response) or sends (streams) a second.
func (r Result) TransactionRate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Transactions) / r.Elapsed.Seconds()
}

// Throughput is 10^6 bits a second that the server received, for streams, and
// the transaction rate otherwise, as netperf reports them.
func (r Result) Throughput() (float64, string) {
	if !isStream(r.Test) {
		return r.TransactionRate(), "Trans/s"
	}
	if r.Elapsed <= 0 {
		return 0, "10^6bits/s"
	}
	return float64(r.Received) * 8 / r.Elapsed.Seconds() / 1e6, "10^6bits/s"
}

// Run asks the netserver at cfg.Host for a test and runs it.
func Run(ctx context.Context, cfg Config) (Result, error) {
	req := request{Test: cfg.Test, Duration: cfg.Duration, ReqSize: cfg.ReqSize, RspSize: cfg.RspSize, MsgSize: cfg.MsgSize}
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	control := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, cfg.Network, control)
	if err != nil {
		return Result{}, fmt.Errorf("establish control: are you sure there is a netserver listening on %s at port %d? %w", cfg.Host, cfg.Port, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r := bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := send(conn, req); err != nil {
		return Result{}, err
	}
	var a answer
	if err := readLine(r, &a); err != nil {
		return Result{}, err
	}
	if a.Error != "" {
		return Result{}, fmt.Errorf("netserver refused the test: %s", a.Error)
	}
	if a.Port < 1 || a.Port > 65535 {
		return Result{}, fmt.Errorf("netserver answered data port %d", a.Port)
	}
	dataAddr := net.JoinHostPort(conn.RemoteAddr().(*net.TCPAddr).IP.String(), strconv.Itoa(a.Port))
	res := Result{Test: cfg.Test}
	conn.SetDeadline(time.Time{})
	if err := runData(ctx, req, dataAddr, &res); err != nil {
		return res, fmt.Errorf("%s: %w", cfg.Test, err)
	}
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if err := send(conn, done{Done: true}); err != nil {
		return res, err
	}
	if err := readLine(r, &a); err != nil {
		return res, err
	}
	if a.Error != "" {
		return res, fmt.Errorf("netserver: %s", a.Error)
	}
	res.Received = a.Bytes
	return res, nil
}

func send(conn net.Conn, v any) error {
	b, _ := json.Marshal(v)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	return nil
}

func runData(ctx context.Context, req request, addr string, res *Result) error {
	start := time.Now()
	end := start.Add(req.Duration)
	defer func() { res.Elapsed = time.Since(start) }()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	network := "tcp"
	if isUDP(req.Test) {
		network = "udp"
	}
	switch req.Test {
	case TCPCRR:
		buf, rsp := make([]byte, req.ReqSize), make([]byte, req.RspSize)
		for time.Now().Before(end) && ctx.Err() == nil {
			t0 := time.Now()
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			c.SetDeadline(end.Add(5 * time.Second))
			err = transact(c, buf, rsp)
			c.Close()
			if err != nil {
				return err
			}
			res.record(time.Since(t0), len(buf))
		}
		return nil
	}
	c, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	switch req.Test {
	case TCPRR:
		c.SetDeadline(end.Add(5 * time.Second))
		buf, rsp := make([]byte, req.ReqSize), make([]byte, req.RspSize)
		for time.Now().Before(end) {
			t0 := time.Now()
			if err := transact(c, buf, rsp); err != nil {
				return err
			}
			res.record(time.Since(t0), len(buf))
		}
	case UDPRR:
		buf, rsp := make([]byte, req.ReqSize), make([]byte, max(req.RspSize, 1))
		for time.Now().Before(end) && ctx.Err() == nil {
			t0 := time.Now()
			c.SetDeadline(t0.Add(time.Second))
			err := transact(c, buf, rsp)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				res.Lost++
				continue
			}
			if err != nil {
				return err
			}
			res.record(time.Since(t0), len(buf))
		}
		if res.Transactions == 0 {
			return fmt.Errorf("no response to any of %d requests", res.Lost)
		}
	case TCPStream, UDPStream:
		c.SetWriteDeadline(end)
		buf := make([]byte, req.MsgSize)
		for time.Now().Before(end) && ctx.Err() == nil {
			n, err := c.Write(buf)
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && req.Test == TCPStream {
				return fmt.Errorf("send: %w", err)
			}
			res.Sent += uint64(n)
			res.Transactions++
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	return nil
}

// transact writes a request and reads the whole response.
func transact(c net.Conn, req, rsp []byte) error {
	if _, err := c.Write(req); err != nil {
		return fmt.Errorf("send request: %w", err)
	}
	if _, ok := c.(*net.UDPConn); ok {
		_, err := c.Read(rsp)
		if err != nil {
			return fmt.Errorf("receive response: %w", err)
		}
		return nil
	}
	for got := 0; got < len(rsp); {
		n, err := c.Read(rsp[got:])
		if err != nil {
			return fmt.Errorf("receive response: %w", err)
		}
		got += n
	}
	return nil
}

func (r *Result) record(d time.Duration, sent int) {
	r.Transactions++
	r.Sent += uint64(sent)
	r.Latency.add(d)
}
