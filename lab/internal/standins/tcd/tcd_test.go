package tcd

import (
	"context"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log two goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var rxLogged = regexp.MustCompile(`rx [1-9]`)

func startServer(t *testing.T, protocol string) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, protocol, ln, io.Discard, func() error { return nil }) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}
	t.Cleanup(func() { cancel() })
	return ln.Addr().String(), stop
}

// A client keeps its connection while the server runs, exits cleanly when told
// to, and fails when the server goes away: that exit is what the suite counts.
func TestClientAndServer(t *testing.T) {
	for _, protocol := range []string{ProtocolTCP, ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			addr, stopServer := startServer(t, protocol)
			if protocol == ProtocolHTTP {
				addr = "http://" + addr + "/echo"
			}
			cfg := ClientConfig{Protocol: protocol, Addr: addr, Interval: 5 * time.Millisecond, Timeout: time.Second, DialAttempts: 1}

			// Stopped by its context: no error.
			ctx, cancel := context.WithCancel(context.Background())
			readyCh := make(chan struct{})
			done := make(chan error, 1)
			log := &syncBuffer{}
			go func() {
				done <- Run(ctx, cfg, log, func() error { close(readyCh); return nil })
			}()
			<-readyCh
			// Replies flow: the once-a-second log counts some.
			for deadline := time.Now().Add(5 * time.Second); !rxLogged.MatchString(log.String()); {
				if time.Now().After(deadline) {
					t.Fatalf("no replies counted:\n%s", log)
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("client stopped by its context: %v\n%s", err, log)
			}

			// Broken by the server's end: an error, or (tcp) the server's close.
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			readyCh = make(chan struct{})
			log = &syncBuffer{}
			go func() { done <- Run(ctx, cfg, log, func() error { close(readyCh); return nil }) }()
			<-readyCh
			stopServer()
			select {
			case err := <-done:
				if err == nil && !strings.Contains(log.String(), "Server closed the connection") {
					t.Errorf("client survived its server:\n%s", log)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("client still running 10s after its server stopped")
			}
		})
	}
}

// A server that answers with other bytes, or not at all, fails the client.
func TestClientDetectsBadAndMissingReplies(t *testing.T) {
	for name, serve := range map[string]func(net.Conn){
		"wrong bytes": func(c net.Conn) {
			buf := make([]byte, MsgSize)
			io.ReadFull(c, buf)
			buf[0] ^= 0xff
			c.Write(buf)
			time.Sleep(2 * time.Second)
		},
		"silence": func(c net.Conn) { io.Copy(io.Discard, c) },
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					defer c.Close()
					serve(c)
				}
			}()
			cfg := ClientConfig{Protocol: ProtocolTCP, Addr: ln.Addr().String(), Interval: 10 * time.Millisecond,
				Timeout: 300 * time.Millisecond, DialAttempts: 1}
			err = Run(context.Background(), cfg, io.Discard, func() error { return nil })
			want := map[string]string{"wrong bytes": "invalid reply", "silence": "no reply received within"}[name]
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want %q", err, want)
			}
		})
	}
}

func TestMainsRejectBadArguments(t *testing.T) {
	for _, tc := range []struct {
		main func([]string, io.Writer, io.Writer) int
		args []string
		want string
	}{
		{ServerMain, nil, "Usage: tcd-server"},
		{ServerMain, []string{"http"}, `"http" is not a port number`},
		{ServerMain, []string{"--protocol", "udp", "8000"}, "Invalid Protocol: udp"},
		{ClientMain, nil, "Usage: tcd-client"},
		{ClientMain, []string{"--protocol", "quic", "a:1"}, "Invalid Protocol: quic"},
		{ClientMain, []string{"--timeout", "0s", "a:1"}, "must be positive"},
	} {
		var stderr strings.Builder
		if code := tc.main(tc.args, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, %q; want an error with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
