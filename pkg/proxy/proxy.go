package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/proxy/accesslog"
)

// Config is the proxy's.
type Config struct {
	// DNSPort, HTTPPort and HTTPIngressPort are the ports of the DNS
	// proxy (UDP and TCP), of the HTTP proxy for egress rules and of the
	// HTTP proxy for ingress rules; 0 leaves a proxy out.
	DNSPort, HTTPPort, HTTPIngressPort uint16
	// Sockets opens the proxy's sockets in the node's namespace.
	Sockets tproxy.Sockets
	// IdentityOf names the identity of a remote address: the
	// datapath's ipcache.
	IdentityOf func(netip.Addr) identity.NumericIdentity
	// Learn hears of the addresses of each allowed DNS answer before the
	// answer goes to the endpoint, so that its connections to them are
	// allowed when they start; it returns once they are, or with an
	// error. The answer waits for it LearnWait at most.
	Learn     func(context.Context, fqdn.Lookup) error
	LearnWait time.Duration
	// UpstreamTimeout bounds the wait for a DNS server's answer.
	UpstreamTimeout time.Duration
	// Record hears of every request and response.
	Record func(accesslog.Record)
	// AckPolicy tells the agent of each policy from its file that the
	// proxy judges by (WatchPolicy), so that the datapath redirects to
	// the proxy only the connections of a policy it knows; nil: the
	// agent is not told.
	AckPolicy func(context.Context, Ack) error
	Log       *slog.Logger
}

// Defaults for the Config's durations: LearnWait is Cilium's
// --tofqdns-proxy-response-max-delay.
const (
	DefaultLearnWait       = 100 * time.Millisecond
	DefaultUpstreamTimeout = 10 * time.Second
)

// Proxy is the layer-7 proxy.
type Proxy struct {
	cfg     Config
	state   state
	answers *answerSockets
	told    toldAnswers
	ready   chan struct{}
}

// New returns a proxy that allows nothing until SetPolicy.
func New(cfg Config) *Proxy {
	if cfg.LearnWait == 0 {
		cfg.LearnWait = DefaultLearnWait
	}
	if cfg.UpstreamTimeout == 0 {
		cfg.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Record == nil {
		cfg.Record = func(accesslog.Record) {}
	}
	if cfg.Learn == nil {
		cfg.Learn = func(context.Context, fqdn.Lookup) error { return nil }
	}
	p := &Proxy{cfg: cfg, answers: newAnswerSockets(cfg.Sockets), ready: make(chan struct{})}
	p.state.set(&compiled{})
	return p
}

// SetPolicy replaces the proxy's policy; one that does not compile
// leaves the current one in place.
func (p *Proxy) SetPolicy(pol Policy) error {
	c, err := compile(pol)
	if err != nil {
		return fmt.Errorf("proxy policy %d: %w", pol.Revision, err)
	}
	p.state.set(c)
	return nil
}

// Ready is closed once Run has opened every socket: from then on the
// datapath finds the proxy.
func (p *Proxy) Ready() <-chan struct{} { return p.ready }

// Revision is the revision of the policy the proxy judges by.
func (p *Proxy) Revision() uint64 { return p.state.get().revision }

// Run opens the proxies' sockets and serves until ctx ends.
func (p *Proxy) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	serve := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	if p.cfg.DNSPort != 0 {
		udp, err := p.cfg.Sockets.ListenUDP(ctx, p.cfg.DNSPort)
		if err != nil {
			return err
		}
		tcp, err := p.cfg.Sockets.ListenTCP(ctx, p.cfg.DNSPort)
		if err != nil {
			udp.Close()
			return err
		}
		go func() { <-ctx.Done(); udp.Close(); tcp.Close() }()
		go p.answers.run(ctx)
		serve(func(ctx context.Context) error { return p.serveDNSUDP(ctx, udp) })
		serve(func(ctx context.Context) error { return serveConns(ctx, tcp, p.serveDNSTCP) })
	}
	for _, h := range []struct {
		port uint16
		dir  spec.Direction
	}{{p.cfg.HTTPPort, spec.Egress}, {p.cfg.HTTPIngressPort, spec.Ingress}} {
		if h.port == 0 {
			continue
		}
		ln, err := p.cfg.Sockets.ListenTCP(ctx, h.port)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		go func() { <-ctx.Done(); ln.Close() }()
		serve(func(ctx context.Context) error {
			return serveConns(ctx, ln, func(ctx context.Context, c net.Conn) { p.serveHTTPConn(ctx, h.dir, c) })
		})
	}
	close(p.ready)
	<-ctx.Done()
	wg.Wait()
	close(errs)
	return errors.Join(func() (out []error) {
		for err := range errs {
			out = append(out, err)
		}
		return out
	}()...)
}

// serveConns hands each connection ln accepts to handle, on its own
// goroutine, until ctx ends.
func serveConns(ctx context.Context, ln net.Listener, handle func(context.Context, net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go handle(ctx, c)
	}
}

// addrPort is a TCP connection's address, IPv4 as such.
func addrPort(a net.Addr) netip.AddrPort {
	ap := a.(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
