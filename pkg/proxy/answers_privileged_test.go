package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/internal/netnamespace"
	"github.com/cilium-go/cilium/internal/testenv"
)

// The DNS proxy's answers come from the server's address, through one
// socket per server that stays while it answers, closes once idle, and
// all close when the proxy stops.
func TestPrivilegedAnswerSocketsKeptAndSwept(t *testing.T) {
	ns := testenv.NewNetNS(t)
	pc, err := netnamespace.ListenPacket(ns, "udp4", "127.0.0.1:5300")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	client := netip.MustParseAddrPort("127.0.0.1:5300")
	server := netip.MustParseAddrPort("192.0.2.53:53")
	received := func() netip.AddrPort {
		t.Helper()
		buf := make([]byte, 64)
		pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := pc.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "answer" {
			t.Fatalf("the client read %q from %v: %v", buf[:n], from, err)
		}
		return from.(*net.UDPAddr).AddrPort()
	}
	a := newAnswerSockets(tproxy.Sockets{NetNS: ns})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	var first *answerSocket
	for range 3 {
		if err := a.send(server, client, []byte("answer")); err != nil {
			t.Fatal(err)
		}
		if from := received(); netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) != server {
			t.Fatalf("the answer came from %s, want the server's %s", from, server)
		}
		a.mu.Lock()
		s, n := a.socks[server], len(a.socks)
		a.mu.Unlock()
		if first == nil {
			first = s
		}
		if n != 1 || s != first {
			t.Fatalf("%d sockets after an answer, the first kept: %v; want the first alone", n, s == first)
		}
	}
	a.sweep(time.Now().Add(-answerIdle))
	if len(a.socks) != 1 {
		t.Fatal("a socket used just now was swept")
	}
	a.sweep(time.Now().Add(time.Second))
	if len(a.socks) != 0 {
		t.Fatal("an idle socket stayed")
	}
	if _, err := first.WriteToUDPAddrPort([]byte("late"), client); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the swept socket still sends: %v", err)
	}
	if err := a.send(server, client, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	received()
	cancel()
	<-done
	if err := a.send(server, client, []byte("answer")); !errors.Is(err, net.ErrClosed) || len(a.socks) != 0 {
		t.Fatalf("after the proxy stopped: %v, %d sockets; want net.ErrClosed and none", err, len(a.socks))
	}
}
