// Package tproxy is the socket side of the datapath's redirect to the
// layer-7 proxy (bpf/lib/proxy.h): the proxy's transparent sockets, which
// receive connections and datagrams addressed to anyone, and its
// upstream sockets, which send from the address of the endpoint they act
// for, marked so that the datapath judges them as that endpoint and sends
// their replies back here.
package tproxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/pkg/identity"
)

// Cilium's magics of the proxy's upstream traffic (the mark's bits
// 0x0f00), which bpf/lib/common.h's MARK_PROXY_EGRESS and
// MARK_PROXY_INGRESS match.
const (
	markMagicProxyIngress = 0x0a00
	markMagicProxyEgress  = 0x0b00
)

// EgressMark is the mark of the proxy's upstream traffic on behalf of a
// local client with identity id, Cilium's encoding: the identity's low 16
// bits in the mark's upper half, its bits 16-23 in the low byte.
func EgressMark(id identity.NumericIdentity) uint32 {
	return identityMark(id) | markMagicProxyEgress
}

// IngressMark is the mark of the proxy's connection to a local server
// whose ingress rules it judged, for a client with identity id.
func IngressMark(id identity.NumericIdentity) uint32 {
	return identityMark(id) | markMagicProxyIngress
}

func identityMark(id identity.NumericIdentity) uint32 {
	return uint32(id)&0xffff<<16 | uint32(id)>>16&0xff
}

// Sockets opens the proxy's sockets in a network namespace: the node's
// (the caller's own when NetNS is empty).
type Sockets struct {
	NetNS string
}

func (s Sockets) in(fn func() error) error { return netnamespace.Do(s.NetNS, fn) }

func setInt(level, opt, v int) func(fd uintptr) error {
	return func(fd uintptr) error { return unix.SetsockoptInt(int(fd), level, opt, v) }
}

var transparent = setInt(unix.SOL_IP, unix.IP_TRANSPARENT, 1)

func control(sets ...func(fd uintptr) error) func(string, string, syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			for _, set := range sets {
				if serr = set(fd); serr != nil {
					return
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

func hostPort(a netip.Addr, port uint16) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(int(port)))
}

// ListenTCP opens the proxy's listening socket on port, every address:
// the datapath gives it the connections it redirects, whose accepted
// sockets have the original destination as their local address.
func (s Sockets) ListenTCP(ctx context.Context, port uint16) (ln net.Listener, err error) {
	lc := net.ListenConfig{Control: control(transparent)}
	err = s.in(func() (err error) {
		ln, err = lc.Listen(ctx, "tcp4", hostPort(netip.IPv4Unspecified(), port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proxy listener on TCP port %d: %w", port, err)
	}
	return ln, nil
}

// ListenUDP opens the proxy's datagram socket on port, every address;
// ReadFrom tells each datagram's original destination.
func (s Sockets) ListenUDP(ctx context.Context, port uint16) (c *net.UDPConn, err error) {
	lc := net.ListenConfig{Control: control(transparent, setInt(unix.SOL_IP, unix.IP_RECVORIGDSTADDR, 1))}
	err = s.in(func() error {
		pc, err := lc.ListenPacket(ctx, "udp4", hostPort(netip.IPv4Unspecified(), port))
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proxy socket on UDP port %d: %w", port, err)
	}
	return c, nil
}

// ReadFrom reads a datagram from a ListenUDP socket: its sender and its
// original destination.
func ReadFrom(c *net.UDPConn, b []byte) (n int, from, to netip.AddrPort, err error) {
	oob := make([]byte, 64)
	n, oobn, _, from, err := c.ReadMsgUDPAddrPort(b, oob)
	if err != nil {
		return 0, from, to, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return 0, from, to, fmt.Errorf("datagram from %s: %w", from, err)
	}
	for _, m := range msgs {
		// struct sockaddr_in: family, port (network order), address.
		if m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_ORIGDSTADDR && len(m.Data) >= 8 {
			to = netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Data[4:8])), binary.BigEndian.Uint16(m.Data[2:4]))
		}
	}
	if !to.IsValid() {
		return 0, from, to, fmt.Errorf("datagram from %s: no original destination", from)
	}
	return n, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), to, nil
}

// Dial opens the proxy's connection ("tcp4" or "udp4") to dst on behalf
// of the client at src: from src's address, with mark (EgressMark or
// IngressMark).
func (s Sockets) Dial(ctx context.Context, network string, src netip.Addr, dst netip.AddrPort, mark uint32) (c net.Conn, err error) {
	var local net.Addr = &net.TCPAddr{IP: src.AsSlice()}
	if network == "udp4" {
		local = &net.UDPAddr{IP: src.AsSlice()}
	}
	d := net.Dialer{LocalAddr: local, Control: control(transparent, setInt(unix.SOL_SOCKET, unix.SO_MARK, int(mark)))}
	err = s.in(func() (err error) {
		c, err = d.DialContext(ctx, network, dst.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proxy upstream from %s to %s: %w", src, dst, err)
	}
	return c, nil
}

// SendingFrom opens a datagram socket that sends with from as its source
// (an address and port of another host): the proxy answers through it in
// the name of the server the endpoint asked. Several may share from; the
// proxy reads nothing from them.
func (s Sockets) SendingFrom(from netip.AddrPort) (c *net.UDPConn, err error) {
	lc := net.ListenConfig{Control: control(transparent, setInt(unix.SOL_SOCKET, unix.SO_REUSEADDR, 1),
		setInt(unix.SOL_SOCKET, unix.SO_REUSEPORT, 1))}
	err = s.in(func() error {
		pc, err := lc.ListenPacket(context.Background(), "udp4", from.String())
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("socket to answer from %s: %w", from, err)
	}
	return c, nil
}
