package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
)

// servers run in the destination namespace: a sink that counts what it
// receives, for the stream, and a one-byte echo for the others.
type servers struct {
	sink, echo net.Listener
	received   atomic.Int64
}

func startServers(ns string, addr netip.Addr) (*servers, error) {
	s := &servers{}
	var err error
	if s.sink, err = dptest.ListenTCP(ns, addr, streamPort); err != nil {
		return nil, err
	}
	if s.echo, err = dptest.ListenTCP(ns, addr, echoPort); err != nil {
		s.sink.Close()
		return nil, err
	}
	go accept(s.sink, func(c net.Conn) {
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			s.received.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	go accept(s.echo, func(c net.Conn) {
		buf := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	return s, nil
}

func (s *servers) Close() error {
	return errors.Join(s.sink.Close(), s.echo.Close())
}

func accept(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// streamRate is what the sink received while one connection wrote for d.
func streamRate(s scenario, d time.Duration) (float64, error) {
	c, err := dptest.DialTCP(s.srcNS, s.dst, streamPort, dptest.ReplyWait)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 128<<10)
	// Warm up the congestion window before counting.
	warm := time.Now().Add(d / 10)
	for time.Now().Before(warm) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	start, t0 := s.servers.received.Load(), time.Now()
	for time.Since(t0) < d {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	got, el := s.servers.received.Load()-start, time.Since(t0)
	return float64(got) * 8 / el.Seconds() / 1e6, nil
}

func exchange(c net.Conn, b []byte) error {
	if _, err := c.Write(b); err != nil {
		return err
	}
	_, err := io.ReadFull(c, b)
	return err
}

// rrRate is one-byte round trips per second on one connection.
func rrRate(s scenario, d time.Duration) (float64, error) {
	c, err := dptest.DialTCP(s.srcNS, s.dst, echoPort, dptest.ReplyWait)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	b := []byte{1}
	n, t0 := 0, time.Now()
	for time.Since(t0) < d {
		if err := exchange(c, b); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// crrRate is connect, one-byte round trip and close, per second.
func crrRate(s scenario, d time.Duration) (float64, error) {
	b := []byte{1}
	n, t0 := 0, time.Now()
	for time.Since(t0) < d {
		c, err := dptest.DialTCP(s.srcNS, s.dst, echoPort, dptest.ReplyWait)
		if err != nil {
			return 0, fmt.Errorf("connection %d: %w", n, err)
		}
		err = exchange(c, b)
		c.Close()
		if err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}
