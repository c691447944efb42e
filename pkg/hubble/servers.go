package hubble

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/cilium/api/v1/peer"
	"github.com/cilium/hive/cell"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
	"github.com/cilium-go/cilium/pkg/hubble/relay"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

// services registers what the node's gRPC servers serve: the Observer,
// health and, with Kubernetes, Peer services. Nil when Hubble is off.
type services func(*grpc.Server)

type servicesParams struct {
	cell.In
	Config   Config
	Observer *hubbleobserver.Server
	K8s      k8sagent.Config
	Cluster  *node.Cluster `optional:"true"`
}

func newServices(p servicesParams) services {
	c, obs, k8s, cluster := p.Config, p.Observer, p.K8s, p.Cluster
	if obs == nil {
		return nil
	}
	// The node's server answers whenever it runs, as Cilium's.
	hs := grpchealth.NewServer()
	hs.SetServingStatus(relay.HealthServiceName, healthpb.HealthCheckResponse_SERVING)
	return func(srv *grpc.Server) {
		observer.RegisterObserverServer(srv, obs)
		healthpb.RegisterHealthServer(srv, hs)
		// Peers are the cluster's nodes: none to tell without Kubernetes.
		if cluster != nil {
			ps := &peerServer{nodes: cluster, port: c.listenPort(), cluster: k8s.ClusterName,
				tls: c.HubbleListenAddress != "" && !c.HubbleDisableTLS}
			peer.RegisterPeerServer(srv, ps)
		}
	}
}

// keepalivePolicy: relays ping to find a node that stopped answering, on
// the TCP listener and on the socket, where a relay of the node follows
// the Peer service: without the permission the server would end their
// connection (too_many_pings).
func keepalivePolicy() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: relay.KeepaliveMinTime, PermitWithoutStream: true})
}

// tcpServerCell serves relays on --hubble-listen-address, with mutual TLS
// unless --hubble-disable-tls.
var tcpServerCell = cell.Module("tcp-server", "The Hubble API for relays over TCP",
	cell.Invoke(registerTCPServer),
)

type serverParams struct {
	cell.In
	Config    Config
	Services  services
	Ring      *flowRing
	Lifecycle cell.Lifecycle
	Log       *slog.Logger
}

func registerTCPServer(p serverParams) error {
	c := p.Config
	if p.Services == nil || c.HubbleListenAddress == "" {
		return nil
	}
	opts := []grpc.ServerOption{keepalivePolicy()}
	if !c.HubbleDisableTLS {
		cfg, err := c.serverTLS(p.Log)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	srv := grpc.NewServer(opts...)
	p.Services(srv)
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := net.Listen("tcp", c.HubbleListenAddress)
			if err != nil {
				return fmt.Errorf("--hubble-listen-address: %w", err)
			}
			p.Log.Info("serving Hubble", "address", ln.Addr().String(), "tls", !c.HubbleDisableTLS)
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

// socketServerCell serves the node's own clients (hubble observe, a relay
// of the node) on --hubble-socket-path.
var socketServerCell = cell.Module("socket-server", "The Hubble API on the node unix socket",
	cell.Invoke(registerSocketServer),
)

func registerSocketServer(p serverParams) {
	if p.Services == nil {
		return
	}
	srv := grpc.NewServer(keepalivePolicy())
	p.Services(srv)
	path := p.Config.HubbleSocketPath
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			// As the agent's own API socket: root and its group.
			ln, err := unixsock.Listen(path)
			if err != nil {
				return fmt.Errorf("--hubble-socket-path: %w", err)
			}
			p.Log.Info("serving Hubble", "socket", path, "capacity", p.Ring.Cap())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(cell.HookContext) error {
			srv.Stop()
			return nil
		},
	})
}
