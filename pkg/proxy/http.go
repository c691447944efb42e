package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/l7"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// accessDenied is the body of the answer to a denied request, Cilium's.
const accessDenied = "Access denied\r\n"

// httpConn is one connection the datapath sent to the HTTP proxy of dir's
// rules, and the proxy's connection to its server, opened for the first
// allowed request.
type httpConn struct {
	p        *Proxy
	dir      spec.Direction
	down     net.Conn
	downr    *bufio.Reader
	downw    *bufio.Writer
	from, to netip.AddrPort
	// remote is the identity of the connection's remote side, as it was
	// when the connection came: requests on it are judged by it, as
	// Cilium's proxy judges them.
	remote identity.NumericIdentity
	up     net.Conn
	upr    *bufio.Reader
	upw    *bufio.Writer // Request.Write would make one for each request
}

// serveHTTPConn judges each request of the connection by the policy of
// the moment (keep-alive connections too): a denied one gets 403 Access
// denied and the connection goes on; an allowed one goes to the server,
// and its response back.
func (p *Proxy) serveHTTPConn(ctx context.Context, dir spec.Direction, c net.Conn) {
	// Writes are buffered: Response.Write writes each header line on
	// its own, a segment each.
	h := &httpConn{p: p, dir: dir, down: c, downr: bufio.NewReader(c), downw: bufio.NewWriter(c),
		from: addrPort(c.RemoteAddr()), to: addrPort(c.LocalAddr())}
	h.remote = p.remoteOf(dir, h.from, h.to)
	defer func() {
		c.Close()
		if h.up != nil {
			h.up.Close()
		}
	}()
	if hasH2CPreface(h.downr) {
		h.serveH2C(ctx, h.downr)
		return
	}
	for {
		req, err := http.ReadRequest(h.downr)
		if err != nil {
			return
		}
		if !h.exchange(ctx, req) {
			return
		}
	}
}

// exchange handles one request; false ends the connection.
func (h *httpConn) exchange(ctx context.Context, req *http.Request) bool {
	x := h.judge(req)
	respond := func(r *http.Response, v accesslog.Verdict) bool {
		x.respond(r, v)
		return r.Write(h.downw) == nil && h.downw.Flush() == nil && !r.Close && !req.Close
	}
	if !x.allowed {
		io.Copy(io.Discard, req.Body)
		return respond(status(req, http.StatusForbidden, accessDenied), accesslog.Denied)
	}
	dropH2CUpgrade(req.Header)
	l7.Apply(req.Header, x.edits)
	if h.up == nil {
		up, err := h.dial(ctx, x.mark)
		if err != nil {
			h.p.cfg.Log.Debug("HTTP proxy: upstream", "server", h.to, "error", err)
			respond(status(req, http.StatusServiceUnavailable, "upstream connect error\r\n"), accesslog.Errored)
			return false
		}
		h.up, h.upr, h.upw = up, bufio.NewReader(up), bufio.NewWriter(up)
	}
	// Request.Write adds a User-Agent where there is none: a present,
	// empty one keeps it out.
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{}
	}
	if err := req.Write(h.upw); err != nil || h.upw.Flush() != nil {
		respond(status(req, http.StatusBadGateway, "upstream write error\r\n"), accesslog.Errored)
		return false
	}
	r, err := http.ReadResponse(h.upr, req)
	if err != nil {
		respond(status(req, http.StatusBadGateway, "upstream reset\r\n"), accesslog.Errored)
		return false
	}
	defer r.Body.Close()
	if r.StatusCode == http.StatusSwitchingProtocols {
		// An upgrade (WebSocket): after the response the connection is
		// no longer HTTP; its bytes pass as they are.
		respond(r, accesslog.Forwarded)
		go io.Copy(h.up, h.downr)
		io.Copy(h.down, h.upr)
		return false
	}
	return respond(r, accesslog.Forwarded)
}

// httpExchange is one request the proxy judged, of either protocol: its
// Request record (sent), what the policy said of it, and the mark of its
// connection upstream.
type httpExchange struct {
	p       *Proxy
	rec     accesslog.Record
	allowed bool
	edits   []l7.Edit // for an allowed one, l7.Apply them before it goes on
	mark    uint32
}

// judge judges req by the policy of the moment and records it: by the
// rules of the endpoint the connection's direction names, and, for an
// egress connection to a local server whose ingress rules are layer 7,
// by those too (policy.go's party).
func (h *httpConn) judge(req *http.Request) *httpExchange {
	p := h.p
	c := p.state.get()
	x := &httpExchange{p: p, rec: accesslog.Record{Time: time.Now(), Type: accesslog.Request, Src: h.from, Dst: h.to, Protocol: spec.ProtoTCP,
		HTTP: requestRecord(req)}}
	pt := p.partyOf(c, h.dir, &x.rec, h.remote)
	x.mark = pt.mark
	if pt.ep != nil {
		x.allowed, x.edits = c.judgeHTTP(c.allows(pt.ep, h.dir, spec.ProtoTCP, h.to.Port(), pt.remote), req)
	}
	if x.allowed && pt.server != nil {
		ok, more := c.judgeHTTP(c.allows(pt.server, spec.Ingress, spec.ProtoTCP, h.to.Port(), pt.ep.Identity), req)
		x.allowed, x.edits = ok, append(x.edits, more...)
	}
	x.rec.Verdict = accesslog.Denied
	if x.allowed {
		x.rec.Verdict = accesslog.Forwarded
	}
	p.cfg.Record(x.rec)
	return x
}

// respond records r, the answer to x's request, with verdict v.
func (x *httpExchange) respond(r *http.Response, v accesslog.Verdict) {
	resp := x.rec.Reply()
	resp.Time, resp.Verdict = time.Now(), v
	resp.Latency = resp.Time.Sub(x.rec.Time)
	resp.HTTP = &accesslog.HTTPRecord{Method: x.rec.HTTP.Method, URL: x.rec.HTTP.URL, Protocol: protoName(r.Proto, r.ProtoMajor), Code: r.StatusCode, Headers: r.Header}
	x.p.cfg.Record(resp)
}

// dial opens the upstream connection: to the connection's original
// destination, from the client's address, with mark.
func (h *httpConn) dial(ctx context.Context, mark uint32) (net.Conn, error) {
	return h.p.cfg.Sockets.Dial(ctx, "tcp4", h.from.Addr(), h.to, mark)
}

// judgeHTTP says whether allows let req through, with the edits of the
// rule that does.
func (c *compiled) judgeHTTP(allows []*policy.L7Allow, req *http.Request) (bool, []l7.Edit) {
	if len(allows) == 0 {
		return false, nil
	}
	if allowsAll(allows, policy.ParserHTTP) {
		return true, nil
	}
	for _, a := range allows {
		if ok, edits, _ := c.http[a.L7].Judge(req); ok {
			return true, edits
		}
	}
	return false, nil
}

func requestRecord(req *http.Request) *accesslog.HTTPRecord {
	u := *req.URL
	u.Scheme, u.Host = "http", req.Host
	return &accesslog.HTTPRecord{Method: req.Method, URL: u.String(), Protocol: protoName(req.Proto, req.ProtoMajor), Headers: req.Header.Clone()}
}

// protoName is the protocol as records name it: Envoy's "HTTP/2" where
// Go says "HTTP/2.0".
func protoName(proto string, major int) string {
	if major == 2 {
		return "HTTP/2"
	}
	return proto
}

// status is the proxy's own response to req.
func status(req *http.Request, code int, body string) *http.Response {
	return &http.Response{StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
}
