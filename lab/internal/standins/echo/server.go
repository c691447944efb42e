package echo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ListenFunc opens the listener of a configured port. Main listens on every
// address; tests map each port to a free loopback port.
type ListenFunc func(port int) (net.Listener, error)

// ListenAll listens on port of every address, as the real server does.
func ListenAll(port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
}

// Server is the echo server of one Config.
type Server struct {
	cfg       Config
	hostname  string
	log       io.Writer
	cert      tls.Certificate
	generated bool // cert was made at start, not read from the files
}

// New prepares a server; it loads (or generates) the TLS certificate when a
// port uses TLS, and listens on nothing yet.
func New(cfg Config, hostname string, log io.Writer) (*Server, error) {
	s := &Server{cfg: cfg, hostname: hostname, log: log}
	if len(cfg.TLSPorts) > 0 {
		var err error
		if s.cert, s.generated, err = loadCertificate(cfg.Cert, cfg.Key, hostname); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// endpoint is one port's server: serve runs it on its listener until stop.
type endpoint struct {
	kind  string
	port  int
	serve func(net.Listener) error
	stop  func()
}

// Run listens on every configured port, then serves until ctx is done or an
// endpoint fails. Errors name the port.
func (s *Server) Run(ctx context.Context, listen ListenFunc) error {
	eps := s.endpoints(ctx)
	lns := make([]net.Listener, 0, len(eps))
	for _, ep := range eps {
		ln, err := listen(ep.port)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("%s port %d: %w", ep.kind, ep.port, err)
		}
		lns = append(lns, ln)
	}
	if s.generated {
		fmt.Fprintf(s.log, "%s not found: serving TLS with a self-signed certificate\n", s.cfg.Cert)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		fmt.Fprintf(s.log, "Listening %s on %s\n", ep.kind, lns[i].Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ep.serve(lns[i]); err != nil {
				errs <- fmt.Errorf("%s port %d: %w", ep.kind, ep.port, err)
				cancel()
			}
		}()
	}
	<-ctx.Done()
	for _, ep := range eps {
		ep.stop()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func (s *Server) endpoints(ctx context.Context) []endpoint {
	var eps []endpoint
	for _, p := range s.cfg.HTTPPorts {
		srv := s.httpServer(p)
		kind := "HTTP"
		if srv.TLSConfig != nil {
			kind = "HTTPS"
		}
		eps = append(eps, endpoint{kind: kind, port: p,
			serve: func(ln net.Listener) error {
				serve := srv.Serve
				if srv.TLSConfig != nil {
					// ServeTLS offers h2 and http/1.1, as the app does.
					serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
				}
				if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			},
			stop: func() {
				shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
				defer done()
				srv.Shutdown(shutdown)
			}})
	}
	for _, p := range s.cfg.TCPPorts {
		tcpCtx, stop := context.WithCancel(ctx)
		eps = append(eps, endpoint{kind: "TCP", port: p,
			serve: func(ln net.Listener) error { return serveTCPEcho(tcpCtx, ln) }, stop: stop})
	}
	for _, p := range s.cfg.GRPCPorts {
		g := s.grpcServer(p)
		eps = append(eps, endpoint{kind: "GRPC", port: p, serve: g.Serve, stop: g.Stop})
	}
	return eps
}

func (s *Server) isTLS(port int) bool { return slices.Contains(s.cfg.TLSPorts, port) }

func (s *Server) tlsConfig(protos ...string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.cert}, NextProtos: protos}
}

func (s *Server) httpServer(port int) *http.Server {
	srv := &http.Server{
		Handler:           &httpHandler{port: port, version: s.cfg.Version, cluster: s.cfg.Cluster, hostname: s.hostname},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(s.log, "", log.LstdFlags),
	}
	if s.isTLS(port) {
		srv.TLSConfig = s.tlsConfig()
	}
	return srv
}

// grpcServer serves only the standard health service, SERVING: enough for a
// client or probe that connects; the echo app's own EchoTestService is not
// implemented (the suite does not call it).
func (s *Server) grpcServer(port int) *grpc.Server {
	var opts []grpc.ServerOption
	if s.isTLS(port) {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tlsConfig("h2"))))
	}
	g := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	return g
}

// serveTCPEcho writes back whatever each connection sends until it closes.
func serveTCPEcho(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			io.Copy(c, c)
		}()
	}
}
