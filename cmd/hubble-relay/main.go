// Command hubble-relay serves Hubble's Observer API for a whole cluster:
// it finds the nodes' Hubble servers through the Peer service, connects
// to each with mutual TLS and merges their flows (pkg/hubble/relay).
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cilium-go/cilium/pkg/crypto/certloader"
	"github.com/cilium-go/cilium/pkg/hubble/relay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand(&config{}).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// config has Cilium's hubble-relay flags and defaults.
type config struct {
	peerService            string
	listenAddress          string
	localListenAddress     string
	healthListenAddress    string
	clusterName            string
	dialTimeout            time.Duration
	retryTimeout           time.Duration
	sortBufferLenMax       int
	sortBufferDrainTimeout time.Duration
	disableClientTLS       bool
	clientCert, clientKey  string
	serverCAFiles          []string
	disableServerTLS       bool
	serverCert, serverKey  string
	clientCAFiles          []string
	limits                 relay.Limits
}

func newCommand(c *config) *cobra.Command {
	root := &cobra.Command{Use: "hubble-relay", Short: "Hubble's Observer API for the whole cluster", SilenceUsage: true}
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the cluster's flows",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) },
	}
	fs := serve.Flags()
	fs.StringVar(&c.peerService, "peer-service", "unix:///var/run/cilium/hubble.sock",
		"the Peer service that lists the nodes: unix:///path or host:port (in Kubernetes the hubble-peer Service)")
	fs.StringVar(&c.listenAddress, "listen-address", ":4245", "where the relay serves, with the server TLS below")
	fs.StringVar(&c.localListenAddress, "local-listen-address", "",
		"a loopback address where the relay also serves, in plaintext, for what runs in its network namespace "+
			"(such as a port-forward: `cilium hubble port-forward`); empty: nowhere")
	fs.StringVar(&c.healthListenAddress, "health-listen-address", ":4222",
		"where the relay serves gRPC's health service alone, in plaintext, for probes (empty: nowhere)")
	fs.StringVar(&c.clusterName, "cluster-name", "default", "the cluster's name, part of the names in the Hubble servers' certificates")
	fs.DurationVar(&c.dialTimeout, "dial-timeout", 5*time.Second, "how long a request waits for a node's connection")
	fs.DurationVar(&c.retryTimeout, "retry-timeout", 30*time.Second, "the wait before the Peer service is asked again after a failure")
	fs.IntVar(&c.sortBufferLenMax, "sort-buffer-len-max", 100, "how many followed flows wait to be put in time order at most")
	fs.DurationVar(&c.sortBufferDrainTimeout, "sort-buffer-drain-timeout", time.Second, "how long a followed flow waits for older ones at most")
	fs.BoolVar(&c.disableClientTLS, "disable-client-tls", false, "connect to the Peer service and the nodes in plaintext")
	fs.StringVar(&c.clientCert, "tls-hubble-client-cert-file", "", "the relay's client certificate towards the nodes")
	fs.StringVar(&c.clientKey, "tls-hubble-client-key-file", "", "the client certificate's key")
	fs.StringSliceVar(&c.serverCAFiles, "tls-hubble-server-ca-files", nil, "CAs that sign the nodes' Hubble server certificates")
	fs.BoolVar(&c.disableServerTLS, "disable-server-tls", false, "serve clients in plaintext")
	fs.StringVar(&c.serverCert, "tls-relay-server-cert-file", "", "the relay's server certificate (required unless --disable-server-tls)")
	fs.StringVar(&c.serverKey, "tls-relay-server-key-file", "", "the server certificate's key")
	fs.StringSliceVar(&c.clientCAFiles, "tls-relay-client-ca-files", nil,
		"CAs that sign the certificates of the relay's clients: with them, a client without such a certificate is refused (mutual TLS)")
	fs.IntVar(&c.limits.MaxStreams, "max-concurrent-streams", 256,
		"how many streams (GetFlows and other streaming calls) the relay serves at once for all clients; one more is refused with ResourceExhausted")
	fs.IntVar(&c.limits.MaxStreamsPerClient, "max-concurrent-streams-per-client", 32,
		"how many streams one client (its certificate's subject under mutual TLS, else its address) has at once; one more is refused with ResourceExhausted")
	root.AddCommand(serve)
	return root
}

// clientTLS is the relay's side of mutual TLS towards the nodes; nil
// with --disable-client-tls. Renewed files are read at the next
// handshake.
func (c *config) clientTLS(log *slog.Logger) (*tls.Config, error) {
	if c.disableClientTLS {
		return nil, nil
	}
	if c.clientCert == "" || c.clientKey == "" || len(c.serverCAFiles) == 0 {
		return nil, fmt.Errorf("client TLS needs --tls-hubble-client-cert-file, --tls-hubble-client-key-file and --tls-hubble-server-ca-files (or --disable-client-tls)")
	}
	l, err := certloader.New(certloader.Files{Cert: c.clientCert, Key: c.clientKey,
		CertFlags: "--tls-hubble-client-cert-file, --tls-hubble-client-key-file",
		CAs:       c.serverCAFiles, CAFlag: "--tls-hubble-server-ca-files"}, log)
	if err != nil {
		return nil, err
	}
	return l.ClientConfig(), nil
}

// serverOptions are the relay's TLS towards its clients, mutual with
// --tls-relay-client-ca-files; renewed files are read at the next
// handshake. Plaintext only when asked for.
func (c *config) serverOptions(log *slog.Logger) ([]grpc.ServerOption, error) {
	var opts []grpc.ServerOption
	if c.disableServerTLS {
		if len(c.clientCAFiles) > 0 {
			return nil, fmt.Errorf("--tls-relay-client-ca-files needs server TLS: drop --disable-server-tls")
		}
		return opts, nil
	}
	if c.serverCert == "" || c.serverKey == "" {
		return nil, fmt.Errorf("server TLS needs --tls-relay-server-cert-file and --tls-relay-server-key-file (or --disable-server-tls)")
	}
	l, err := certloader.New(certloader.Files{Cert: c.serverCert, Key: c.serverKey,
		CertFlags: "--tls-relay-server-cert-file, --tls-relay-server-key-file",
		CAs:       c.clientCAFiles, CAFlag: "--tls-relay-client-ca-files"}, log)
	if err != nil {
		return nil, err
	}
	return append(opts, grpc.Creds(credentials.NewTLS(l.ServerConfig()))), nil
}

func (c *config) validate() error {
	if c.sortBufferLenMax < 1 {
		return fmt.Errorf("--sort-buffer-len-max %d: want 1 or more", c.sortBufferLenMax)
	}
	if c.dialTimeout <= 0 || c.retryTimeout <= 0 || c.sortBufferDrainTimeout <= 0 {
		return fmt.Errorf("--dial-timeout, --retry-timeout and --sort-buffer-drain-timeout must be positive")
	}
	if err := c.validateLocalListenAddress(); err != nil {
		return err
	}
	return c.limits.Validate()
}

// validateLocalListenAddress keeps the plaintext listener off the
// network: only a loopback address, and not the port of a --listen-address
// that takes every address (the two would collide; the network listener
// belongs on the pod's IP then).
func (c *config) validateLocalListenAddress() error {
	if c.localListenAddress == "" {
		return nil
	}
	local, err := netip.ParseAddrPort(c.localListenAddress)
	if err != nil || !local.Addr().IsLoopback() {
		return fmt.Errorf("--local-listen-address %q: want a loopback address and port, such as 127.0.0.1:4245 "+
			"(it serves in plaintext, without TLS, so it must not be reachable from the network)", c.localListenAddress)
	}
	host, port, err := net.SplitHostPort(c.listenAddress)
	if err != nil {
		return fmt.Errorf("--listen-address %q: %w", c.listenAddress, err)
	}
	if ip, err := netip.ParseAddr(host); (host == "" || err == nil && ip.IsUnspecified()) && port == strconv.Itoa(int(local.Port())) {
		return fmt.Errorf("--listen-address %q takes every address, --local-listen-address's port %d too: "+
			"give --listen-address the pod's IP (such as $(POD_IP):%s)", c.listenAddress, local.Port(), port)
	}
	return nil
}

func (c *config) run(ctx context.Context) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := c.validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.listenAddress)
	if err != nil {
		return fmt.Errorf("--listen-address: %w", err)
	}
	defer ln.Close()
	var localLn net.Listener
	if c.localListenAddress != "" {
		if localLn, err = net.Listen("tcp", c.localListenAddress); err != nil {
			return fmt.Errorf("--local-listen-address: %w", err)
		}
		defer localLn.Close()
	}
	var healthLn net.Listener
	if c.healthListenAddress != "" {
		if healthLn, err = net.Listen("tcp", c.healthListenAddress); err != nil {
			return fmt.Errorf("--health-listen-address: %w", err)
		}
		defer healthLn.Close()
	}
	return c.serve(ctx, log, ln, localLn, healthLn)
}

// serve runs the relay on ln, in plaintext on localLn (if any), and its
// health service alone on healthLn (if any), until ctx ends.
func (c *config) serve(ctx context.Context, log *slog.Logger, ln, localLn, healthLn net.Listener) error {
	clientTLS, err := c.clientTLS(log)
	if err != nil {
		return err
	}
	opts, err := c.serverOptions(log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pool := relay.NewPool(relay.Options{PeerTarget: c.peerService, PeerServerName: relay.ServerName("hubble-peer", c.clusterName),
		TLS: clientTLS, DialTimeout: c.dialTimeout, RetryTimeout: c.retryTimeout}, log)
	hs := health.NewServer()
	go reportHealth(ctx, pool, hs, healthInterval)
	// One Observer, one health and one count of streams behind both
	// listeners: they differ only in TLS.
	obs := relay.NewServer(pool, "cilium-go", c.sortBufferLenMax, c.sortBufferDrainTimeout)
	limit := grpc.StreamInterceptor(c.limits.StreamInterceptor())
	newServer := func(opts ...grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, limit)...)
		observer.RegisterObserverServer(s, obs)
		healthpb.RegisterHealthServer(s, hs)
		return s
	}
	srv := newServer(opts...)
	go pool.Run(ctx)
	if localLn != nil {
		local := newServer()
		go local.Serve(localLn)
		defer local.Stop()
		log.Info("hubble-relay serving in plaintext on loopback", "address", localLn.Addr().String())
	}
	if healthLn != nil {
		// The kubelet's gRPC probes speak no TLS.
		probes := grpc.NewServer()
		healthpb.RegisterHealthServer(probes, hs)
		go probes.Serve(healthLn)
		defer probes.Stop()
	}
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	log.Info("hubble-relay serving", "address", ln.Addr().String(), "peer-service", c.peerService,
		"client-tls", clientTLS != nil, "server-tls", !c.disableServerTLS, "mutual-tls", len(c.clientCAFiles) > 0)
	return srv.Serve(ln)
}

// healthInterval is how often the Observer's health follows the pool.
const healthInterval = 2 * time.Second

// reportHealth tells, until ctx ends, whether the relay can answer under
// the Observer service's health name, which `hubble status` asks about:
// serving once the Peer service is followed and a node is connected, as
// Cilium's relay. The overall name "", which the kubelet's probes ask
// about, says only that the process serves: liveness is not readiness,
// and a relay without nodes is not helped by a restart.
func reportHealth(ctx context.Context, pool *relay.Pool, hs *health.Server, every time.Duration) {
	hs.SetServingStatus(relay.HealthServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if pool.Serving() {
			st = healthpb.HealthCheckResponse_SERVING
		}
		hs.SetServingStatus(relay.HealthServiceName, st)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
