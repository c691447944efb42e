package netnamespace

import (
	"context"
	"net"
)

// Listen opens a listener in the network namespace at path ("" = the
// caller's). A socket belongs to the namespace it was made in, so it
// serves there from any thread afterwards.
func Listen(path, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(path, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ListenPacket is Listen for packet sockets (udp, ip4:icmp).
func ListenPacket(path, network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := Do(path, func() (err error) {
		c, err = net.ListenPacket(network, addr)
		return err
	})
	return c, err
}

// DialContext connects from the network namespace at path.
func DialContext(ctx context.Context, path, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := Do(path, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
