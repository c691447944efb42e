package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/dptest"
	"github.com/cilium-go/cilium/internal/netnamespace"
)

// itemPath is what every request of the bench asks for: a path that the
// third of httpRules allows.
const itemPath = "/api/v1/items/42"

// httpServer answers every request with a small JSON body naming the
// address it came from, so that a check can see that the proxy's
// upstream connection kept the client's address.
type httpServer struct {
	srv      *http.Server
	requests atomic.Int64
}

func serveHTTP(ns string, addr netip.Addr, port int) (*httpServer, error) {
	ln, err := netnamespace.Listen(ns, "tcp4", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		return nil, fmt.Errorf("listen for HTTP: %w", err)
	}
	s := &httpServer{}
	s.srv = &http.Server{ReadHeaderTimeout: dptest.ReplyWait, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"item":42,"name":"bench","from":"`+r.RemoteAddr+`"}`)
	})}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *httpServer) Close() error { return s.srv.Close() }

// httpClient sends from ns over one kept-alive connection at a time.
type httpClient struct {
	c   *http.Client
	req *http.Request
}

func newHTTPClient(ns string, server netip.Addr) *httpClient {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netnamespace.DialContext(ctx, ns, network, addr)
		}}
	req, _ := http.NewRequest(http.MethodGet, "http://"+netip.AddrPortFrom(server, httpPort).String()+itemPath, nil)
	req.Header.Set("Accept", "application/json")
	return &httpClient{c: &http.Client{Timeout: dptest.ReplyWait, Transport: tr}, req: req}
}

// get makes one request and reads its answer whole.
func (h *httpClient) get(body *bytes.Buffer) error {
	resp, err := h.c.Do(h.req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body.Reset()
	if _, err := body.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %q", itemPath, resp.Status, body.Bytes())
	}
	return nil
}

func (h *httpClient) close() { h.c.CloseIdleConnections() }

// httpFrom is the client address the server saw for a request from ns.
func httpFrom(ns string, server netip.Addr) (netip.Addr, error) {
	h := newHTTPClient(ns, server)
	defer h.close()
	var body bytes.Buffer
	if err := h.get(&body); err != nil {
		return netip.Addr{}, err
	}
	_, rest, ok := bytes.Cut(body.Bytes(), []byte(`"from":"`))
	from, _, _ := bytes.Cut(rest, []byte(`"`))
	ap, err := netip.ParseAddrPort(string(from))
	if !ok || err != nil {
		return netip.Addr{}, fmt.Errorf("the server's answer %q names no client address", body.Bytes())
	}
	return ap.Addr(), nil
}

// httpRate is the rate of requests that conns kept-alive connections from
// ns make to server for d, each sending its next request when the
// answer to its last one is read. Each connection opens with a request
// before the clock starts. sent counts every request.
func httpRate(ns string, server netip.Addr, conns int, d time.Duration) (rate float64, sent int64, err error) {
	clients := make([]*httpClient, conns)
	for i := range clients {
		clients[i] = newHTTPClient(ns, server)
		defer clients[i].close()
		var body bytes.Buffer
		if err := clients[i].get(&body); err != nil {
			return 0, sent, fmt.Errorf("open connection %d: %w", i, err)
		}
		sent++
	}
	var (
		wg   sync.WaitGroup
		done atomic.Int64
		mu   sync.Mutex
		errs []error
	)
	start := time.Now()
	end := start.Add(d)
	for _, c := range clients {
		wg.Go(func() {
			var body bytes.Buffer
			n := int64(0)
			defer func() { done.Add(n) }()
			for time.Now().Before(end) {
				if err := c.get(&body); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				n++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	sent += done.Load()
	if err := errors.Join(errs...); err != nil {
		return 0, sent, err
	}
	return float64(done.Load()) / elapsed.Seconds(), sent, nil
}

// httpLatency is each request's time, from sending to the answer read
// whole, on one kept-alive connection from ns to server for d, requests
// one after another. The connection opens with a request before the
// clock starts: the latencies have one fewer than sent.
func httpLatency(ns string, server netip.Addr, d time.Duration) (lat []time.Duration, sent int64, err error) {
	c := newHTTPClient(ns, server)
	defer c.close()
	var body bytes.Buffer
	if err := c.get(&body); err != nil {
		return nil, 0, fmt.Errorf("open the connection: %w", err)
	}
	sent = 1
	for t0 := time.Now(); time.Since(t0) < d; {
		start := time.Now()
		if err := c.get(&body); err != nil {
			return nil, sent, err
		}
		lat = append(lat, time.Since(start))
		sent++
	}
	return lat, sent, nil
}
