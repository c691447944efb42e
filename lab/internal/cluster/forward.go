package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
)

// forward accepts connections on ln until ctx is done, and copies each,
// both ways and untouched, to a connection that dial makes for it. A
// failed dial closes only the connection it was for.
func forward(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error), log *slog.Logger) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Error("forwarder", "listen", ln.Addr().String(), "error", err)
			}
			return
		}
		go func() {
			defer c.Close()
			up, err := dial(ctx)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
			go func() { io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

// closeWrite passes an end of stream on, keeping the other direction open.
func closeWrite(c net.Conn) {
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		hc.CloseWrite()
	}
}
