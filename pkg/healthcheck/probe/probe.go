// Package probe checks that nodes answer, as Cilium's health checking
// does: an ICMP echo and an HTTP GET /hello on the health port, to every
// node's address and to its health endpoint's, reported in the models of
// Cilium's health API. It is plain Go: the sockets come from a Network,
// which opens them in the node's network namespace.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
)

// Port is Cilium's health port: the responders listen on it, on the node
// and in the health endpoint.
const Port = 4240

// HelloPath is what the responders answer with 200 OK.
const HelloPath = "/hello"

// DefaultTimeout bounds one probe: Cilium gives a probe some seconds.
const DefaultTimeout = 5 * time.Second

// Network opens the prober's sockets where the node's traffic starts.
type Network interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	// ListenICMP is a raw IPv4 ICMP socket ("ip4:icmp").
	ListenICMP() (net.PacketConn, error)
}

// Target is a node to probe.
type Target struct {
	Name   string
	NodeIP netip.Addr
	// HealthIP is the node's health endpoint; invalid when the node has
	// published none (or endpoint health checking is off).
	HealthIP netip.Addr
}

// Prober probes targets. It is safe for concurrent use.
type Prober struct {
	net     Network
	timeout time.Duration
	now     func() time.Time
	http    *http.Client
}

// New is a prober whose probes each take timeout at most (0: DefaultTimeout).
func New(n Network, timeout time.Duration) *Prober {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tr := &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true, Proxy: nil}
	return &Prober{net: n, timeout: timeout, now: time.Now,
		http: &http.Client{Transport: tr, Timeout: timeout,
			// A responder answers, it does not send us elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Probe probes every target, all at once, and returns their status in
// the order of targets.
func (p *Prober) Probe(ctx context.Context, targets []Target) []*healthmodels.NodeStatus {
	out := make([]*healthmodels.NodeStatus, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		out[i] = &healthmodels.NodeStatus{Name: t.Name,
			Host: &healthmodels.HostStatus{PrimaryAddress: &healthmodels.PathStatus{IP: t.NodeIP.String()}}}
		wg.Go(func() { p.path(ctx, t.NodeIP, out[i].Host.PrimaryAddress) })
		if t.HealthIP.IsValid() {
			ps := &healthmodels.PathStatus{IP: t.HealthIP.String()}
			out[i].HealthEndpoint = &healthmodels.EndpointStatus{PrimaryAddress: ps}
			// The deprecated field, which older clients read.
			out[i].Endpoint = ps
			wg.Go(func() { p.path(ctx, t.HealthIP, ps) })
		}
	}
	wg.Wait()
	return out
}

// path probes ip over ICMP and HTTP, at once, into ps.
func (p *Prober) path(ctx context.Context, ip netip.Addr, ps *healthmodels.PathStatus) {
	var wg sync.WaitGroup
	wg.Go(func() { ps.Icmp = p.result(p.Ping(ctx, ip)) })
	wg.Go(func() { ps.HTTP = p.result(p.Hello(ctx, ip)) })
	wg.Wait()
}

func (p *Prober) result(rtt time.Duration, err error) *healthmodels.ConnectivityStatus {
	cs := &healthmodels.ConnectivityStatus{LastProbed: p.now().UTC().Format(time.RFC3339)}
	if err != nil {
		// A non-empty status is what Cilium's clients read as unreachable.
		cs.Status = err.Error()
		return cs
	}
	// Cilium's clients read a latency of 0 as "no answer yet"; a
	// nanosecond is the least a round trip takes.
	cs.Latency = max(rtt.Nanoseconds(), 1)
	return cs
}

// Hello is GET http://ip:4240/hello; only 200 OK is an answer.
func (p *Prober) Hello(ctx context.Context, ip netip.Addr) (time.Duration, error) {
	if !ip.IsValid() {
		return 0, errors.New("no address")
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	url := "http://" + netip.AddrPortFrom(ip, Port).String() + HelloPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	start := p.now()
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return p.now().Sub(start), nil
}
