package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium-go/cilium/pkg/l7"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// h2cPreface opens every HTTP/2 connection (RFC 9113, 3.4); on cleartext
// TCP a client that sends it first knows the server speaks HTTP/2 (h2c
// with prior knowledge).
const h2cPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// hasH2CPreface says whether the connection opens with the HTTP/2
// preface. It reads no further than the first byte that differs, so that
// an HTTP/1.1 request shorter than the preface is not waited on.
func hasH2CPreface(br *bufio.Reader) bool {
	for i := 1; i <= len(h2cPreface); i++ {
		b, err := br.Peek(i)
		if err != nil || b[i-1] != h2cPreface[i-1] {
			return false
		}
	}
	return true
}

// h2Protocols is unencrypted HTTP/2 only, for both sides of the proxy.
var h2Protocols = func() *http.Protocols {
	p := &http.Protocols{}
	p.SetUnencryptedHTTP2(true)
	return p
}()

// serveH2C serves an HTTP/2 connection: each stream's request is judged
// on its own, as an HTTP/1.1 one is. A denied one gets 403 Access denied
// on its stream and the connection goes on; the allowed ones go to the
// server over one HTTP/2 connection of their own, which ends with this
// one.
func (h *httpConn) serveH2C(ctx context.Context, br *bufio.Reader) {
	errLog := slog.NewLogLogger(h.p.cfg.Log.Handler(), slog.LevelDebug)
	upCtx, cancel := context.WithCancel(ctx)
	up := &h2Upstream{h: h, ctx: upCtx, cancel: cancel, errLog: errLog}
	defer up.close()
	// net/http serves listeners: this one hands over the one connection
	// (with the bytes already peeked) and closes when it is done.
	ln := newOneConnListener(&peekedConn{Conn: h.down, r: br})
	srv := &http.Server{Protocols: h2Protocols, Handler: http.HandlerFunc(up.serveHTTP),
		ErrorLog:    errLog,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				ln.Close()
			}
		}}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	srv.Serve(ln)
}

// h2Upstream is the HTTP/2 connection to the server for the allowed
// requests of one downstream connection, dialed for the first of them
// and again if the server closes it.
type h2Upstream struct {
	h *httpConn
	// ctx is the dial's, cancelled when the downstream connection ends.
	ctx    context.Context
	cancel context.CancelFunc
	errLog *log.Logger

	mu sync.Mutex
	cc *http.ClientConn
	// closed is set when the downstream connection is done; a handler
	// that starts late dials nothing.
	closed bool
}

// serveHTTP handles one stream's request.
func (u *h2Upstream) serveHTTP(w http.ResponseWriter, req *http.Request) {
	x := u.h.judge(req)
	if !x.allowed {
		writeStatus(w, x, req, http.StatusForbidden, accessDenied, accesslog.Denied)
		return
	}
	l7.Apply(req.Header, x.edits)
	cc, err := u.conn(x.mark)
	if err != nil {
		u.h.p.cfg.Log.Debug("HTTP proxy: upstream", "server", u.h.to, "error", err)
		writeStatus(w, x, req, http.StatusServiceUnavailable, "upstream connect error\r\n", accesslog.Errored)
		return
	}
	rp := &httputil.ReverseProxy{Transport: cc,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", u.h.to.String()
			// The proxy is transparent: what the client sent goes on as
			// it is, forwarding headers too.
			for _, k := range forwardingHeaders {
				if v, ok := pr.In.Header[k]; ok {
					pr.Out.Header[k] = v
				}
			}
		},
		ModifyResponse: func(r *http.Response) error {
			x.respond(r, accesslog.Forwarded)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			u.h.p.cfg.Log.Debug("HTTP proxy: upstream", "server", u.h.to, "error", err)
			writeStatus(w, x, req, http.StatusBadGateway, "upstream reset\r\n", accesslog.Errored)
		},
		ErrorLog: u.errLog,
	}
	rp.ServeHTTP(w, req)
}

// forwardingHeaders are those ReverseProxy's Rewrite drops.
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// conn is the upstream connection, dialed with mark if there is none
// that works.
func (u *h2Upstream) conn(mark uint32) (*http.ClientConn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errH2CDone
	}
	if u.cc != nil && u.cc.Err() == nil {
		return u.cc, nil
	}
	if u.cc != nil {
		u.cc.Close()
		u.cc = nil
	}
	tr := &http.Transport{Protocols: h2Protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return u.h.dial(ctx, mark) }}
	cc, err := tr.NewClientConn(u.ctx, "http", u.h.to.String())
	if err != nil {
		return nil, err
	}
	u.cc = cc
	return cc, nil
}

var errH2CDone = errors.New("the client's connection is closed")

// close closes the upstream connection, ending the requests still on it.
func (u *h2Upstream) close() {
	u.cancel()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.cc != nil {
		u.cc.Close()
	}
}

// writeStatus answers the request with the proxy's own response, and
// records it.
func writeStatus(w http.ResponseWriter, x *httpExchange, req *http.Request, code int, body string, v accesslog.Verdict) {
	r := status(req, code, body)
	r.Proto, r.ProtoMajor, r.ProtoMinor = req.Proto, req.ProtoMajor, req.ProtoMinor
	x.respond(r, v)
	for k, vs := range r.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// dropH2CUpgrade takes the offer of an upgrade to HTTP/2 (RFC 7540, 3.2;
// deprecated by RFC 9113) out of an HTTP/1.1 request's headers: a server
// that took it would turn the connection into HTTP/2 that the proxy
// passes as bytes, unjudged. Without it the server answers in HTTP/1.1
// and the connection goes on so. Other upgrades (WebSocket) stay.
func dropH2CUpgrade(hd http.Header) {
	isH2C := func(t string) bool { return strings.EqualFold(t, "h2c") }
	ups := tokens(hd["Upgrade"])
	if !slices.ContainsFunc(ups, isH2C) {
		return
	}
	ups = slices.DeleteFunc(ups, isH2C)
	conn := slices.DeleteFunc(tokens(hd["Connection"]), func(t string) bool {
		return strings.EqualFold(t, "HTTP2-Settings") || len(ups) == 0 && strings.EqualFold(t, "Upgrade")
	})
	hd.Del("Http2-Settings")
	setTokens(hd, "Upgrade", ups)
	setTokens(hd, "Connection", conn)
}

// tokens are the comma-separated elements of a header's values.
func tokens(vs []string) []string {
	var out []string
	for _, v := range vs {
		for t := range strings.SplitSeq(v, ",") {
			if t = textproto.TrimString(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func setTokens(hd http.Header, name string, ts []string) {
	if len(ts) == 0 {
		hd.Del(name)
		return
	}
	hd.Set(name, strings.Join(ts, ", "))
}

// oneConnListener is a listener of one connection, that it hands over
// once; Accept then waits for Close.
type oneConnListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	addr      net.Addr
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{conns: make(chan net.Conn, 1), done: make(chan struct{}), addr: c.LocalAddr()}
	l.conns <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }

// peekedConn reads what its reader has buffered before the connection.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
