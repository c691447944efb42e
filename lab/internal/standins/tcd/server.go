// Package tcd is the lab's stand-in for the quay.io/cilium/test-connection-disruption
// image: tcd-server echoes, tcd-client keeps one long-lived connection (tcp) or
// keep-alive HTTP client (http) busy and exits as soon as a reply is late, wrong
// or the connection breaks. Cilium's connectivity test counts the client pods'
// restarts before and after an upgrade: a restart is an interrupted connection.
// Both write their readiness file (/tmp/server-ready, /tmp/client-ready), which
// the suite's exec probes read.
//
// The wire protocol is the upstream tool's: the client sends messages of
// MsgSize random bytes, the server writes each message back; over HTTP each
// request's body comes back as the response body with status 200.
package tcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// MsgSize is the size of one message.
const MsgSize = 16

// Protocols the server and client speak.
const (
	ProtocolTCP  = "tcp"
	ProtocolHTTP = "http"
)

// Files the suite's readiness probes read.
const (
	ServerReadyFile = "/tmp/server-ready"
	ClientReadyFile = "/tmp/client-ready"
)

// beNice lowers the process' priority, as the upstream tools do, so that a
// busy client does not starve the node it runs on.
func beNice() error {
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, 19); err != nil {
		return fmt.Errorf("set priority: %w", err)
	}
	return nil
}

func touch(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// Serve listens on ln and echoes until ctx ends, then closes the listener and
// every connection and waits for them. ready is called once it accepts.
func Serve(ctx context.Context, protocol string, ln net.Listener, log io.Writer, ready func() error) error {
	switch protocol {
	case ProtocolTCP:
		return serveTCP(ctx, ln, log, ready)
	case ProtocolHTTP:
		return serveHTTP(ctx, ln, log, ready)
	}
	return fmt.Errorf("invalid protocol %q (tcp, http)", protocol)
}

func serveTCP(ctx context.Context, ln net.Listener, log io.Writer, ready func() error) error {
	go func() {
		<-ctx.Done()
		fmt.Fprintln(log, "Closing listener")
		ln.Close()
	}()
	if err := ready(); err != nil {
		return err
	}
	fmt.Fprintf(log, "Listening on %s...\n", ln.Addr())
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			fmt.Fprintln(log, "Listener closed")
			return nil
		}
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			echo(ctx, conn, log)
		}()
	}
}

// echo writes each message of conn back to it.
func echo(ctx context.Context, conn net.Conn, log io.Writer) {
	stop := context.AfterFunc(ctx, func() {
		fmt.Fprintln(log, "Closing connection to", conn.RemoteAddr())
		conn.Close()
	})
	defer stop()
	defer conn.Close()
	fmt.Fprintln(log, "New connection from", conn.RemoteAddr())
	buf := make([]byte, MsgSize)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				fmt.Fprintf(log, "Error reading from %s: %v\n", conn.RemoteAddr(), err)
			}
			return
		}
		if _, err := conn.Write(buf); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Fprintf(log, "Error writing to %s: %v\n", conn.RemoteAddr(), err)
			}
			return
		}
	}
}

// serveHTTP answers every path with the request's body, status 200 and the
// X-Echo-Server header.
func serveHTTP(ctx context.Context, ln net.Listener, log io.Writer, ready func() error) error {
	hs := &http.Server{
		ReadHeaderTimeout: 30 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(log, "New HTTP request: %s (%s)\n", r.URL, r.Method)
			w.Header().Set("X-Echo-Server", "Test-Connection-Disruption")
			w.WriteHeader(http.StatusOK)
			// A message is small: a larger body is cut, not echoed without bound.
			if _, err := io.Copy(w, io.LimitReader(r.Body, 1<<20)); err != nil {
				fmt.Fprintf(log, "Error copying request body: %s\n", r.URL)
			}
		}),
	}
	go func() {
		<-ctx.Done()
		fmt.Fprintln(log, "Closing HTTP Server")
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shutdown)
	}()
	if err := ready(); err != nil {
		return err
	}
	fmt.Fprintf(log, "Listening on %s...\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
