package proxy

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// The preface is told from an HTTP/1.1 request by its first differing
// byte: a request shorter than the preface, whose client then waits for
// the answer, is not waited on.
func TestHasH2CPreface(t *testing.T) {
	for _, tc := range []struct {
		sent string
		want bool
	}{
		{h2cPreface, true},
		{h2cPreface + "\x00\x00\x12\x04", true},
		{"GET / HTTP/1.0\r\n\r\n", false},
		{"PRI * HTTP/1.1\r\n\r\n", false},
		{"POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false},
	} {
		client, server := net.Pipe()
		go client.Write([]byte(tc.sent)) // the client does not close: it waits for an answer
		got := make(chan bool, 1)
		go func() { got <- hasH2CPreface(bufio.NewReader(server)) }()
		select {
		case g := <-got:
			if g != tc.want {
				t.Errorf("%q: %v, want %v", tc.sent, g, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%q: still reading", tc.sent)
		}
		client.Close()
		server.Close()
	}
}

// An offer to upgrade to h2c goes, and only it.
func TestDropH2CUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want http.Header
	}{
		{"h2c alone", http.Header{"Connection": {"Upgrade, HTTP2-Settings"}, "Upgrade": {"h2c"}, "Http2-Settings": {"AAMAAABkAAQAAP__"}, "Accept": {"*/*"}},
			http.Header{"Accept": {"*/*"}}},
		{"h2c among others", http.Header{"Connection": {"keep-alive, Upgrade", "HTTP2-Settings"}, "Upgrade": {"websocket, H2C"}, "Http2-Settings": {"x"}},
			http.Header{"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"}}},
		{"websocket", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}},
			http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}},
		{"no upgrade", http.Header{"Connection": {"close"}, "Http2-Settings": {"x"}},
			http.Header{"Connection": {"close"}, "Http2-Settings": {"x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.in.Clone()
			dropH2CUpgrade(h)
			if len(h) != len(tc.want) {
				t.Fatalf("%v, want %v", h, tc.want)
			}
			for k, v := range tc.want {
				if got := h[k]; len(got) != len(v) || got[0] != v[0] {
					t.Fatalf("%v, want %v", h, tc.want)
				}
			}
		})
	}
}
