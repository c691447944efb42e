package main

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
)

// relayPort is where the proxy process relays the connections of the
// relay path.
const relayPort = 10090

// relay is the floor under any proxy behind the datapath's redirect: it
// takes the connections redirected to it and copies their bytes to and
// from the original destination, from the client's address and marked
// as the proxy marks its upstream (the client's egress), and parses,
// judges and records nothing. The relay path of the HTTP part measures
// it: what a proxy of this shape costs on this machine before it reads a
// request. It counts the connections it relayed.
func relay(ctx context.Context, identityOf func(netip.Addr) identity.NumericIdentity, relayed *atomic.Int64) (io.Closer, error) {
	var open nodedatapath.ProxySockets
	ln, err := open.ListenTCP(ctx, relayPort)
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
				from, to := c.RemoteAddr().(*net.TCPAddr).AddrPort(), c.LocalAddr().(*net.TCPAddr).AddrPort()
				src, dst := from.Addr().Unmap(), netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
				up, err := open.Dial(ctx, "tcp4", src, dst, nodedatapath.ProxyEgressMark(identityOf(src)))
				if err != nil {
					return
				}
				defer up.Close()
				relayed.Add(1)
				go func() {
					io.Copy(up, c)
					up.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, up)
			}()
		}
	}()
	return ln, nil
}
