// Package hubble is the agent's Hubble server: it makes flows of the
// datapath's events (a subscriber of the monitor's), keeps the last ones
// in a ring and serves them through Hubble's Observer gRPC service on a
// unix socket (and to relays over TCP), and exports them to a file if
// asked (pkg/hubble/exporter).
package hubble

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/cilium/api/v1/peer"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/crypto/certloader"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/exporter"
	"github.com/cilium-go/cilium/pkg/hubble/metrics"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/hubble/relay"
	"github.com/cilium-go/cilium/pkg/identity"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
	"github.com/cilium-go/cilium/pkg/monitor"
	"github.com/cilium-go/cilium/pkg/nodedatapath"
	"github.com/cilium-go/cilium/pkg/policy"
)

// Cell runs the Hubble server when --enable-hubble is set.
var Cell = cell.Module("hubble", "Hubble - the datapath events as flows over gRPC",
	cell.Config(DefaultConfig),
	cell.Config(exporter.DefaultConfig),
	health.JobGroup,
	// Flows of forwarded packets come from the datapath's traces.
	cell.Provide(func(c Config) nodedatapath.TracesWanted { return nodedatapath.TracesWanted(c.EnableHubble) }),
	cell.Invoke(register),
)

// Config has Cilium's flags and defaults.
type Config struct {
	EnableHubble              bool   `mapstructure:"enable-hubble"`
	HubbleSocketPath          string `mapstructure:"hubble-socket-path"`
	HubbleEventBufferCapacity int    `mapstructure:"hubble-event-buffer-capacity"`
	HubbleEventQueueSize      int    `mapstructure:"hubble-event-queue-size"`
	// HubbleListenAddress is where relays reach the node's server
	// (host:port, Cilium's :4244); empty: the socket only.
	HubbleListenAddress string `mapstructure:"hubble-listen-address"`
	// HubbleDisableTLS serves the listen address in plaintext.
	HubbleDisableTLS       bool     `mapstructure:"hubble-disable-tls"`
	HubbleTLSCertFile      string   `mapstructure:"hubble-tls-cert-file"`
	HubbleTLSKeyFile       string   `mapstructure:"hubble-tls-key-file"`
	HubbleTLSClientCAFiles []string `mapstructure:"hubble-tls-client-ca-files"`
	// HubbleMetrics are the flow metrics to count (pkg/hubble/metrics),
	// served on HubbleMetricsServer (host:port, Cilium's :9965).
	HubbleMetrics       string `mapstructure:"hubble-metrics"`
	HubbleMetricsServer string `mapstructure:"hubble-metrics-server"`
}

// queueSize is how many events wait for the parser: by default as many
// as the ring holds.
func (c Config) queueSize() int {
	if c.HubbleEventQueueSize > 0 {
		return c.HubbleEventQueueSize
	}
	return c.HubbleEventBufferCapacity + 1
}

// DefaultConfig: off, as Cilium's agent flag; Cilium's socket and ring size.
var DefaultConfig = Config{HubbleSocketPath: "/var/run/cilium/hubble.sock", HubbleEventBufferCapacity: 4095}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("enable-hubble", d.EnableHubble, "serve the datapath's flows through Hubble's gRPC API")
	fs.String("hubble-socket-path", d.HubbleSocketPath, "unix socket the Hubble server listens on")
	fs.Int("hubble-event-buffer-capacity", d.HubbleEventBufferCapacity, "how many flows the node keeps: 2^n-1, up to 65535")
	fs.Int("hubble-event-queue-size", d.HubbleEventQueueSize, "how many datapath events may wait to become flows (0: the buffer capacity)")
	fs.String("hubble-listen-address", d.HubbleListenAddress, "host:port where relays reach this node's Hubble server (Cilium's :4244); empty: the socket only")
	fs.Bool("hubble-disable-tls", d.HubbleDisableTLS, "serve --hubble-listen-address without TLS")
	fs.String("hubble-tls-cert-file", d.HubbleTLSCertFile, "the server's certificate for --hubble-listen-address")
	fs.String("hubble-tls-key-file", d.HubbleTLSKeyFile, "the server certificate's key")
	fs.StringSlice("hubble-tls-client-ca-files", d.HubbleTLSClientCAFiles, "CAs whose client certificates the server requires (mutual TLS); none: any client")
	fs.String("hubble-metrics", d.HubbleMetrics,
		"flow metrics, separated by spaces, each name[:option=value;...]: flow, drop, tcp, port-distribution, icmp, policy; options sourceContext, destinationContext, labelsContext")
	fs.String("hubble-metrics-server", d.HubbleMetricsServer, "host:port where --hubble-metrics are served (Cilium's :9965); empty: none")
}

// Validate names the first bad flag.
func (c Config) Validate() error {
	if !c.EnableHubble {
		return nil
	}
	if err := container.CheckCapacity(c.HubbleEventBufferCapacity); err != nil {
		return fmt.Errorf("--hubble-event-buffer-capacity %w", err)
	}
	if c.HubbleEventQueueSize < 0 {
		return fmt.Errorf("--hubble-event-queue-size %d: want 0 or more", c.HubbleEventQueueSize)
	}
	if _, err := metrics.Parse(c.HubbleMetrics); err != nil {
		return fmt.Errorf("--hubble-metrics: %w", err)
	}
	if (c.HubbleMetrics == "") != (c.HubbleMetricsServer == "") {
		return fmt.Errorf("--hubble-metrics %q and --hubble-metrics-server %q: give both or neither", c.HubbleMetrics, c.HubbleMetricsServer)
	}
	if !filepath.IsAbs(c.HubbleSocketPath) {
		return fmt.Errorf("--hubble-socket-path %q: an absolute path is required", c.HubbleSocketPath)
	}
	if c.HubbleListenAddress == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(c.HubbleListenAddress); err != nil || port == "" {
		return fmt.Errorf("--hubble-listen-address %q: want host:port", c.HubbleListenAddress)
	}
	if !c.HubbleDisableTLS && (c.HubbleTLSCertFile == "" || c.HubbleTLSKeyFile == "") {
		return fmt.Errorf("--hubble-listen-address %q: TLS needs --hubble-tls-cert-file and --hubble-tls-key-file (or --hubble-disable-tls)",
			c.HubbleListenAddress)
	}
	return nil
}

// serverTLS is the listen address's TLS: the server's certificate and,
// with client CAs, mutual TLS that refuses a client without a
// certificate they signed. Renewed files are read at the next handshake.
func (c Config) serverTLS(log *slog.Logger) (*tls.Config, error) {
	l, err := certloader.New(certloader.Files{Cert: c.HubbleTLSCertFile, Key: c.HubbleTLSKeyFile,
		CertFlags: "--hubble-tls-cert-file, --hubble-tls-key-file",
		CAs:       c.HubbleTLSClientCAFiles, CAFlag: "--hubble-tls-client-ca-files"}, log)
	if err != nil {
		return nil, err
	}
	return l.ServerConfig(), nil
}

// listenPort is the port of the listen address, which peers announce.
func (c Config) listenPort() int {
	_, port, _ := net.SplitHostPort(c.HubbleListenAddress)
	n, _ := strconv.Atoi(port)
	return n
}

type params struct {
	cell.In
	Config    Config
	Export    exporter.Config
	K8s       k8sagent.Config
	Lifecycle cell.Lifecycle
	Jobs      job.Group
	Log       *slog.Logger
	Monitor   *monitor.Hub
	DB        *statedb.DB
	Endpoints statedb.Table[*endpoint.Desired]
	Watchers  *k8sagent.Watchers `optional:"true"`
	Cookies   *policy.Cookies
	Policy    *policy.Agent                            `optional:"true"`
	Policies  statedb.Table[*policy.EndpointPolicy]    `optional:"true"`
	Frontends statedb.Table[*loadbalancer.FrontendRow] `optional:"true"`
}

// Version is what ServerStatus reports.
const Version = "cilium-go"

func register(p params) error {
	if err := p.Config.Validate(); err != nil {
		return err
	}
	if !p.Config.EnableHubble {
		return nil
	}
	if err := p.Export.Validate(); err != nil {
		return err
	}
	ring, err := container.NewRing(p.Config.HubbleEventBufferCapacity)
	if err != nil {
		return err
	}
	node := p.K8s.K8sNodeName
	if node == "" {
		node, _ = os.Hostname()
	}
	st := &agentState{db: p.DB, endpoints: p.Endpoints, watchers: p.Watchers, cookies: p.Cookies, frontends: p.Frontends,
		netns: newNetNSEndpoints(p.DB, p.Endpoints, nodedatapath.NetNSCookie)}
	pr := parser.New(node, st, monitor.Clock)
	counted, err := serveMetrics(p)
	if err != nil {
		return err
	}
	sub := p.Monitor.Subscribe(p.Config.queueSize())
	p.Jobs.Add(job.OneShot("hubble-events", func(ctx context.Context, _ cell.Health) error {
		return ReadEvents(ctx, p.Log, sub, pr, ring, counted)
	}))
	if p.Export.Enabled() {
		exp, err := exporter.New(p.Export, node, p.Log)
		if err != nil {
			return err
		}
		p.Jobs.Add(job.OneShot("hubble-exporter", func(ctx context.Context, _ cell.Health) error { return exp.Run(ctx, ring) }))
	}
	agentRing, err := container.NewRing(agentEventsCapacity)
	if err != nil {
		return err
	}
	agent := &agentEvents{ring: agentRing, node: node}
	if p.Policy != nil {
		p.Policy.OnPolicyChange(agent.policyChanged)
	}
	p.Jobs.Add(job.OneShot("hubble-agent-events", func(ctx context.Context, _ cell.Health) error {
		agent.started(time.Now())
		return agent.watchEndpoints(ctx, p.DB, p.Endpoints, st.IdentityLabels)
	}))
	if p.Policies != nil {
		p.Jobs.Add(job.OneShot("hubble-policy-refusals", func(ctx context.Context, _ cell.Health) error {
			return agent.watchRefusals(ctx, p.DB, p.Policies, st.IdentityLabels)
		}))
	}
	obs := hubbleobserver.New(ring, node, Version).WithAgentEvents(agentRing)
	// The node's server answers whenever it runs, as Cilium's.
	hs := grpchealth.NewServer()
	hs.SetServingStatus(relay.HealthServiceName, healthpb.HealthCheckResponse_SERVING)
	addServices := func(srv *grpc.Server) {
		observer.RegisterObserverServer(srv, obs)
		healthpb.RegisterHealthServer(srv, hs)
		// Peers are the cluster's nodes: none to tell without Kubernetes.
		if p.Watchers != nil {
			ps := &peerServer{nodes: p.Watchers, port: p.Config.listenPort(), cluster: p.K8s.ClusterName,
				tls: p.Config.HubbleListenAddress != "" && !p.Config.HubbleDisableTLS}
			peer.RegisterPeerServer(srv, ps)
		}
	}
	// Relays ping to find a node that stopped answering, on the TCP
	// listener and on the socket, where a relay of the node follows the
	// Peer service: without the permission the server would end their
	// connection (too_many_pings).
	keepalivePolicy := grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: relay.KeepaliveMinTime, PermitWithoutStream: true})
	srv := grpc.NewServer(keepalivePolicy)
	addServices(srv)
	if p.Config.HubbleListenAddress != "" {
		opts := []grpc.ServerOption{keepalivePolicy}
		if !p.Config.HubbleDisableTLS {
			cfg, err := p.Config.serverTLS(p.Log)
			if err != nil {
				return err
			}
			opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
		}
		tcp := grpc.NewServer(opts...)
		addServices(tcp)
		p.Lifecycle.Append(cell.Hook{
			OnStart: func(cell.HookContext) error {
				ln, err := net.Listen("tcp", p.Config.HubbleListenAddress)
				if err != nil {
					return fmt.Errorf("--hubble-listen-address: %w", err)
				}
				p.Log.Info("serving Hubble", "address", ln.Addr().String(), "tls", !p.Config.HubbleDisableTLS)
				go tcp.Serve(ln)
				return nil
			},
			OnStop: func(cell.HookContext) error {
				tcp.Stop()
				return nil
			},
		})
	}
	path := p.Config.HubbleSocketPath
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			// As the agent's own API socket: root and its group.
			ln, err := server.Listen(path)
			if err != nil {
				return fmt.Errorf("--hubble-socket-path: %w", err)
			}
			p.Log.Info("serving Hubble", "socket", path, "capacity", ring.Cap())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(cell.HookContext) error {
			srv.Stop()
			return nil
		},
	})
	return nil
}

// serveMetrics registers --hubble-metrics and serves them; nil without.
func serveMetrics(p params) (*metrics.Metrics, error) {
	specs, err := metrics.Parse(p.Config.HubbleMetrics)
	if err != nil || len(specs) == 0 {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(specs, reg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := net.Listen("tcp", p.Config.HubbleMetricsServer)
			if err != nil {
				return fmt.Errorf("--hubble-metrics-server: %w", err)
			}
			p.Log.Info("serving Hubble metrics", "address", ln.Addr().String(), "metrics", p.Config.HubbleMetrics)
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(ctx) },
	})
	return m, nil
}

// ReadEvents makes flows of the events sub receives until ctx ends, and
// counts them into m when there are metrics.
func ReadEvents(ctx context.Context, log *slog.Logger, sub *monitor.Subscription, pr *parser.Parser, ring *container.Ring, m *metrics.Metrics) error {
	defer sub.Close()
	for {
		ev, lost, ok := sub.Next(ctx)
		if !ok {
			return nil
		}
		if lost > 0 {
			// Readers see the loss where it happened, among the flows.
			ring.Write(container.Event{Lost: &flow.LostEvent{Source: flow.LostEventSource_OBSERVER_EVENTS_QUEUE,
				NumEventsLost: lost, Last: timestamppb.Now()}})
		}
		f, err := pr.Decode(ev)
		if err != nil {
			log.Debug("event not shown", "error", err)
			continue
		}
		ring.Write(container.Event{Flow: f})
		if m != nil {
			m.Process(f)
		}
	}
}

// agentState answers the parser from the agent's tables and caches.
type agentState struct {
	db        *statedb.DB
	endpoints statedb.Table[*endpoint.Desired]
	watchers  *k8sagent.Watchers // nil without Kubernetes
	cookies   *policy.Cookies
	frontends statedb.Table[*loadbalancer.FrontendRow] // nil without the load balancer
	netns     *netnsEndpoints
}

func (s *agentState) LocalEndpoint(id uint16) (parser.Endpoint, bool) {
	d, _, ok := s.endpoints.Get(s.db.ReadTxn(), endpoint.IDIndex.Query(id))
	if !ok {
		return parser.Endpoint{}, false
	}
	return parser.Endpoint{ID: d.ID, Identity: d.Identity, Namespace: d.PodNamespace, PodName: d.PodName}, true
}

func (s *agentState) EndpointByIP(addr netip.Addr) (parser.Endpoint, bool) {
	if s.watchers == nil {
		return parser.Endpoint{}, false
	}
	cep, ok := s.watchers.CiliumEndpointByIP(addr)
	if !ok {
		return parser.Endpoint{}, false
	}
	ep := parser.Endpoint{Namespace: cep.Namespace, PodName: cep.Name}
	if st := cep.Status; st.Identity != nil && st.Identity.ID > 0 && st.Identity.ID < 1<<32 {
		ep.Identity = identity.NumericIdentity(st.Identity.ID)
	}
	return ep, true
}

func (s *agentState) IdentityLabels(num identity.NumericIdentity) ([]string, bool) {
	if s.watchers == nil {
		r, ok := identity.ReservedIdentity(num)
		if !ok {
			return nil, false
		}
		return r.Labels.Strings(), true
	}
	ls, ok := s.watchers.IdentityLabels(num)
	return ls.Strings(), ok
}

// ServiceByRevNAT is the Service of the frontend with the index.
func (s *agentState) ServiceByRevNAT(index uint16) (parser.Service, bool) {
	if s.frontends == nil {
		return parser.Service{}, false
	}
	r, _, ok := s.frontends.Get(s.db.ReadTxn(), loadbalancer.FrontendRevNATIndex.Query(index))
	if !ok {
		return parser.Service{}, false
	}
	return parser.Service{Name: r.Service.Name, Namespace: r.Service.Namespace}, true
}

func (s *agentState) PolicyOrigins(cookie uint32) []parser.Policy {
	origins := s.cookies.Origins(cookie)
	out := make([]parser.Policy, len(origins))
	for i, o := range origins {
		out[i] = parser.Policy(o)
	}
	return out
}

func (s *agentState) EndpointByNetNS(cookie uint64) (uint16, netip.Addr, bool) {
	return s.netns.lookup(cookie)
}
