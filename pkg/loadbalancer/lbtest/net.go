package lbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// Net is a TCP network in memory, for tests of servers that must not
// listen on the machine: Listen takes an address, Dial connects to it
// through a net.Pipe.
type Net struct {
	mu        sync.Mutex
	listeners map[netip.AddrPort]*listener
}

// ErrInUse is Listen's error for an address another listener has.
var ErrInUse = errors.New("address already in use")

// ErrRefused is Dial's error for an address nobody listens on.
var ErrRefused = errors.New("connection refused")

// NewNet is a network without listeners.
func NewNet() *Net { return &Net{listeners: map[netip.AddrPort]*listener{}} }

// Listen listens at a, which nothing else may hold.
func (n *Net) Listen(a netip.AddrPort) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[a]; ok {
		return nil, fmt.Errorf("listen %s: %w", a, ErrInUse)
	}
	l := &listener{net: n, addr: a, conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[a] = l
	return l, nil
}

// Dial connects to the listener at a.
func (n *Net) Dial(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
	n.mu.Lock()
	l, ok := n.listeners[a]
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dial %s: %w", a, ErrRefused)
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("dial %s: %w", a, ErrRefused)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type listener struct {
	net   *Net
	addr  netip.AddrPort
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.net.mu.Lock()
		if l.net.listeners[l.addr] == l {
			delete(l.net.listeners, l.addr)
		}
		l.net.mu.Unlock()
	})
	return nil
}

func (l *listener) Addr() net.Addr { return net.TCPAddrFromAddrPort(l.addr) }
