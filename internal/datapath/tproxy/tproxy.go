// Package tproxy is the socket side of the datapath's redirect to the
// layer-7 proxy (bpf/lib/proxy.h): the proxy's transparent listening
// sockets, which receive connections and datagrams addressed to anyone,
// and its upstream sockets, which send from the address of the endpoint
// they act for, marked so that the datapath judges them as that
// endpoint and sends their replies back here.
package tproxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/pkg/identity"
)

// Mark values, Cilium's: the magic in bits 0x0f00, and an identity's low
// 16 bits in the mark's upper half and its bits 16-23 in the low byte.
const (
	markMagicProxyEgress = 0x0b00
)

// EgressMark is the mark of the proxy's upstream traffic on behalf of an
// endpoint with identity id (an egress redirect).
func EgressMark(id identity.NumericIdentity) uint32 {
	return uint32(id)&0xffff<<16 | uint32(id)>>16&0xff | markMagicProxyEgress
}

func transparent(fd uintptr) error {
	return unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
}

func control(set func(fd uintptr) error) func(string, string, syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = set(fd) }); err != nil {
			return err
		}
		return serr
	}
}

// ListenTCP opens the proxy's listening socket on port, every address:
// the datapath gives it the connections it redirects, whose accepted
// sockets have the original destination as their local address.
func ListenTCP(ctx context.Context, port uint16) (net.Listener, error) {
	lc := net.ListenConfig{Control: control(transparent)}
	ln, err := lc.Listen(ctx, "tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(port))))
	if err != nil {
		return nil, fmt.Errorf("proxy listener on port %d: %w", port, err)
	}
	return ln, nil
}

// DialUpstream opens the proxy's connection to dst on behalf of the
// endpoint at src with identity id: from src's address, marked.
func DialUpstream(ctx context.Context, src netip.Addr, dst netip.AddrPort, id identity.NumericIdentity) (net.Conn, error) {
	mark := EgressMark(id)
	d := net.Dialer{
		LocalAddr: &net.TCPAddr{IP: src.AsSlice()},
		Control: control(func(fd uintptr) error {
			if err := transparent(fd); err != nil {
				return err
			}
			return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}),
	}
	c, err := d.DialContext(ctx, "tcp4", dst.String())
	if err != nil {
		return nil, fmt.Errorf("proxy upstream from %s to %s: %w", src, dst, err)
	}
	return c, nil
}
