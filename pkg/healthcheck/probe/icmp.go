package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// echoSeq numbers this process's echo requests, so that a reply to an
// earlier probe is not taken for the answer to this one.
var echoSeq atomic.Uint32

// Ping sends one ICMP echo request to ip and waits for its reply. A raw
// socket sees every ICMP packet of the namespace: the reply is the one
// from ip with this request's identifier, sequence number and payload.
func (p *Prober) Ping(ctx context.Context, ip netip.Addr) (time.Duration, error) {
	if !ip.Is4() {
		return 0, errors.New("ICMP: an IPv4 address is required")
	}
	conn, err := p.net.ListenICMP()
	if err != nil {
		return 0, fmt.Errorf("ICMP socket: %w", err)
	}
	defer conn.Close()
	deadline := p.now().Add(p.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, err
	}
	// Closing the socket ends a read when ctx ends first.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	id, seq := rand.IntN(1<<16), int(echoSeq.Add(1)&0xffff)
	payload := []byte(fmt.Sprintf("cilium-health %d", rand.Uint64()))
	req := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: payload}}
	b, err := req.Marshal(nil)
	if err != nil {
		return 0, err
	}
	start := p.now()
	if _, err := conn.WriteTo(b, &net.IPAddr{IP: ip.AsSlice()}); err != nil {
		return 0, fmt.Errorf("ICMP echo to %s: %w", ip, err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("ICMP echo to %s: %w", ip, context.Cause(ctx))
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return 0, fmt.Errorf("ICMP echo to %s: no reply within %s", ip, p.timeout)
			}
			return 0, fmt.Errorf("ICMP echo to %s: %w", ip, err)
		}
		if a, ok := from.(*net.IPAddr); !ok || !a.IP.Equal(ip.AsSlice()) {
			continue
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq && string(e.Data) == string(payload) {
			return p.now().Sub(start), nil
		}
	}
}
