package proxy

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/tproxy"
)

// answerSockets are the DNS proxy's sockets that answer over UDP in the
// name of the servers asked, one per server's address, kept from one
// answer to the next: opening one for each answer cost the proxy more
// than the rest of its work for a lookup. One unused for answerIdle
// closes.
type answerSockets struct {
	open   tproxy.Sockets
	mu     sync.Mutex
	closed bool
	socks  map[netip.AddrPort]*answerSocket
}

type answerSocket struct {
	*net.UDPConn
	last time.Time
}

const answerIdle = 10 * time.Second

func newAnswerSockets(open tproxy.Sockets) *answerSockets {
	return &answerSockets{open: open, socks: map[netip.AddrPort]*answerSocket{}}
}

// send sends b to to from the address from.
func (a *answerSockets) send(from, to netip.AddrPort, b []byte) error {
	a.mu.Lock()
	s := a.socks[from]
	if s == nil && !a.closed {
		c, err := a.open.SendingFrom(from)
		if err != nil {
			a.mu.Unlock()
			return err
		}
		s = &answerSocket{UDPConn: c}
		a.socks[from] = s
	}
	if s != nil {
		s.last = time.Now()
	}
	a.mu.Unlock()
	if s == nil {
		return net.ErrClosed
	}
	_, err := s.WriteToUDPAddrPort(b, to)
	return err
}

// run closes the sockets idle for answerIdle as it goes, and all of them
// when ctx ends.
func (a *answerSockets) run(ctx context.Context) {
	tick := time.NewTicker(answerIdle / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			a.mu.Lock()
			a.closed = true
			a.mu.Unlock()
			a.sweep(time.Time{})
			return
		case now := <-tick.C:
			a.sweep(now.Add(-answerIdle))
		}
	}
}

// sweep closes the sockets last used before cutoff, all of them once the
// proxy stopped.
func (a *answerSockets) sweep(cutoff time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for from, s := range a.socks {
		if a.closed || s.last.Before(cutoff) {
			s.Close()
			delete(a.socks, from)
		}
	}
}
