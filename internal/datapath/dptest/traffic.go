package dptest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/netnamespace"
)

// Traffic runs from Go sockets created inside the namespaces: a socket
// belongs to the namespace of the thread that created it.

// ReplyWait bounds every wait for an answer.
const ReplyWait = 3 * time.Second

// ListenTCP opens a TCP listener inside the namespace.
func ListenTCP(ns string, addr netip.Addr, port int) (net.Listener, error) {
	var ln net.Listener
	err := netnamespace.Do(ns, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
		return err
	})
	return ln, err
}

// serveTCP accepts connections in the namespace until closed, handing each to
// handle on its own goroutine, which closes it afterwards.
func serveTCP(ns string, addr netip.Addr, port int, handle func(net.Conn)) (io.Closer, error) {
	ln, err := ListenTCP(ns, addr, port)
	if err != nil {
		return nil, err
	}
	go func() {
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
	}()
	return ln, nil
}

// ServeTCPEcho runs a TCP echo server in the namespace until closed.
func ServeTCPEcho(ns string, addr netip.Addr, port int) (io.Closer, error) {
	return serveTCP(ns, addr, port, func(c net.Conn) { io.Copy(c, c) })
}

// ServeUDPEcho runs a UDP echo server in the namespace until closed.
func ServeUDPEcho(ns string, addr netip.Addr, port int) (io.Closer, error) {
	var pc net.PacketConn
	err := netnamespace.Do(ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	return pc, nil
}

// DialTCP connects from inside the namespace.
func DialTCP(ns string, to netip.Addr, port int, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := netnamespace.Do(ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(to.String(), strconv.Itoa(port)), timeout)
		return err
	})
	return c, err
}

// RoundTrip writes msg and expects it echoed back.
func RoundTrip(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(ReplyWait))
	if _, err := c.Write([]byte(msg)); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if string(buf) != msg {
		return fmt.Errorf("echo %q, want %q", buf, msg)
	}
	return nil
}

// TCPEcho connects, expects one message echoed and closes.
func TCPEcho(ns string, to netip.Addr, port int) error {
	c, err := DialTCP(ns, to, port, ReplyWait)
	if err != nil {
		return err
	}
	defer c.Close()
	return RoundTrip(c, "tcp across the datapath")
}

// UDPEcho sends one datagram and expects it echoed.
func UDPEcho(ns string, to netip.Addr, port int) error {
	var c net.Conn
	err := netnamespace.Do(ns, func() (err error) {
		c, err = net.Dial("udp4", net.JoinHostPort(to.String(), strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	return RoundTrip(c, "udp across the datapath")
}

var pingID atomic.Uint32

// Ping sends one ICMP echo request from the namespace and waits for the
// matching reply.
func Ping(ns string, to netip.Addr) error {
	id := uint16(0x4000 + pingID.Add(1))
	return netnamespace.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval(int64(250 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		buf := gopacket.NewSerializeBuffer()
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: id, Seq: 1}
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, icmp, gopacket.Payload("ping")); err != nil {
			return err
		}
		if err := unix.Sendto(fd, buf.Bytes(), 0, &unix.SockaddrInet4{Addr: to.As4()}); err != nil {
			return fmt.Errorf("send echo: %w", err)
		}
		deadline := time.Now().Add(ReplyWait)
		rb := make([]byte, 1500)
		for time.Now().Before(deadline) {
			n, _, err := unix.Recvfrom(fd, rb, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("receive: %w", err)
			}
			p := gopacket.NewPacket(rb[:n], layers.LayerTypeIPv4, gopacket.Default)
			ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			ic, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			if ip != nil && ic != nil && ic.TypeCode.Type() == layers.ICMPv4TypeEchoReply && ic.Id == id &&
				bytes.Equal(ip.SrcIP.To4(), to.AsSlice()) {
				return nil
			}
		}
		return fmt.Errorf("no echo reply from %s", to)
	})
}

// ServeRemoteAddr answers every TCP connection with the address and port
// it came from, to show what a server outside the cluster sees, then
// echoes what the connection sends.
func ServeRemoteAddr(ns string, addr netip.Addr, port int) (io.Closer, error) {
	return serveTCP(ns, addr, port, func(c net.Conn) {
		if _, err := c.Write([]byte(c.RemoteAddr().String() + "\n")); err == nil {
			io.Copy(c, c)
		}
	})
}

// RemoteAddrSeen connects to a ServeRemoteAddr server and returns the
// address it reports.
func RemoteAddrSeen(ns string, to netip.Addr, port int) (netip.Addr, error) {
	c, err := DialTCP(ns, to, port, ReplyWait)
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	ap, err := ReadRemoteAddr(c)
	return ap.Addr(), err
}

// ReadRemoteAddr reads what a ServeRemoteAddr server says on c: where c
// came from, as the server saw it.
func ReadRemoteAddr(c net.Conn) (netip.AddrPort, error) {
	c.SetDeadline(time.Now().Add(ReplyWait))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("read: %w", err)
	}
	return netip.ParseAddrPort(strings.TrimSpace(line))
}

// UDPRefused sends a datagram to a port where nothing listens and
// reports whether the ICMP port-unreachable came back to the socket.
func UDPRefused(ns string, to netip.Addr, port int) error {
	var c net.Conn
	err := netnamespace.Do(ns, func() (err error) {
		c, err = net.Dial("udp4", net.JoinHostPort(to.String(), strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ReplyWait))
	if _, err := c.Write([]byte("anyone?")); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	_, err = c.Read(make([]byte, 16))
	if errors.Is(err, unix.ECONNREFUSED) {
		return nil
	}
	return fmt.Errorf("read: %v, want connection refused", err) //nolint:errorlint // err is nil when the read succeeded: shown, not wrapped
}
