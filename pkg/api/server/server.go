// Package server is the agent's REST API (api/v1/openapi.yaml) on its
// unix socket: health, configuration, IPAM, endpoints, identities, maps
// and policy. Handlers decode and validate, then call the cells that own
// the state; they hold none of their own.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipam"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

// Cell serves the API on paths.Config.SocketPath.
var Cell = cell.Module("api-server", "REST API on the unix socket of the agent",
	cell.Provide(New),
	cell.Invoke(func(*Server) {}),
)

// MapLister lists the node's BPF maps for GET /v1/map.
type MapLister interface {
	ListMaps() ([]models.BPFMap, error)
}

// IPCacheLister lists the node's ipcache for GET /v1/ipcache.
type IPCacheLister interface {
	ListIPCache() ([]models.IPCacheEntry, error)
}

// FQDNCache lists what endpoints learned from allowed DNS answers, for GET
// /v1/fqdn/cache.
type FQDNCache interface {
	Lookups() []models.DNSLookup
}

// ServiceLister lists the frontends the agent balances, for GET /v1/service.
type ServiceLister interface {
	ListServices() []models.Service
}

// NodeLister lists the nodes of the cluster that the agent knows, for GET
// /v1/node. Without one (Kubernetes off) the API answers 501.
type NodeLister interface {
	ListNodes() ([]models.Node, error)
}

// Monitor streams the node's datapath events for GET /v1/monitor: every
// event of types (all when none) goes to emit until ctx ends or emit
// fails.
type Monitor interface {
	Stream(ctx context.Context, types []string, emit func(models.MonitorEvent) error) error
}

// NodeInfo is what the API tells about the node.
type NodeInfo interface {
	// PodMTU is the MTU for pod interfaces; 0 when not known yet.
	PodMTU() int
	// PodDevice is the kind of device pair pods get: veth or netkit.
	PodDevice() string
}

// PodDeviceChecker tells whether a host device may carry a pod's
// endpoint: the datapath provides one that asks the kernel.
type PodDeviceChecker interface {
	// CheckPodDevice fails unless hostIfName, with index hostIfindex, is
	// the host side of a pod's device pair.
	CheckPodDevice(hostIfName string, hostIfindex int) error
}

// PodIdentities tells the identity, with its labels, given to a pod.
type PodIdentities interface {
	Identity(pod endpoint.Pod) (*identity.Identity, bool)
}

// Params are the server's dependencies.
type Params struct {
	cell.In
	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	Paths     paths.Config
	Flags     *pflag.FlagSet
	Health    *health.Registry
	IPAM      *ipam.Allocator
	Endpoints *endpoint.Manager
	// PodDevices is required: without it no request could be checked.
	PodDevices PodDeviceChecker
	Maps       MapLister       `optional:"true"`
	Node       NodeInfo        `optional:"true"`
	IPCache    IPCacheLister   `optional:"true"`
	Nodes      NodeLister      `optional:"true"`
	Services   ServiceLister   `optional:"true"`
	Policy     PolicyExplainer `optional:"true"`
	Monitor    Monitor         `optional:"true"`
	FQDN       FQDNCache       `optional:"true"`
	// PodIdentities labels the endpoints' identities; without it (no
	// Kubernetes) only reserved identities have labels.
	PodIdentities PodIdentities        `optional:"true"`
	LogLevel      *slog.LevelVar       `optional:"true"`
	Registry      *prometheus.Registry `optional:"true"`
	Reporter      cell.Health          `optional:"true"`
}

// A client that trickles its request or holds idle connections must not
// pin the agent's goroutines and sockets. There is no WriteTimeout: PUT
// /v1/endpoint answers only once the datapath is live, which may take as
// long as the identity allocation does.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

// Server is the API.
type Server struct {
	p       Params
	http    *http.Server
	metrics *apiMetrics
}

// New registers the server's start and stop.
func New(p Params) (*Server, error) {
	m, err := newAPIMetrics(p.Registry)
	if err != nil {
		return nil, err
	}
	s := &Server{p: p, metrics: m}
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := unixsock.Listen(p.Paths.SocketPath)
			if err != nil {
				return err
			}
			p.Log.Info("serving API", "socket", p.Paths.SocketPath)
			s.report(nil)
			go func() { s.report(s.http.Serve(ln)) }()
			return nil
		},
		OnStop: func(ctx cell.HookContext) error {
			err := s.http.Shutdown(context.Context(ctx))
			return errors.Join(err, unixsock.Remove(p.Paths.SocketPath))
		},
	})
	return s, nil
}

// report tells the module's health how serving goes.
func (s *Server) report(err error) {
	switch {
	case s.p.Reporter == nil:
	case err == nil:
		s.p.Reporter.OK("serving on " + s.p.Paths.SocketPath)
	case errors.Is(err, http.ErrServerClosed):
		s.p.Reporter.Stopped("shut down")
	default:
		s.p.Reporter.Degraded("serve", err)
	}
}

// route is one operation of the OpenAPI document.
type route struct {
	method, path string
	handle       func(*Server, http.ResponseWriter, *http.Request)
}

// routes is the API; a test checks it against api/v1/openapi.yaml.
var routes = []route{
	{"GET", "/v1/healthz", (*Server).getHealthz},
	{"GET", "/v1/config", (*Server).getConfig},
	{"PATCH", "/v1/config", (*Server).patchConfig},
	{"GET", "/v1/ipam", (*Server).getIPAM},
	{"POST", "/v1/ipam", (*Server).postIPAM},
	{"DELETE", "/v1/ipam/{ip}", (*Server).deleteIPAM},
	{"GET", "/v1/endpoint", (*Server).listEndpoints},
	{"GET", "/v1/endpoint/{id}", (*Server).getEndpoint},
	{"PUT", "/v1/endpoint/{id}", (*Server).putEndpoint},
	{"DELETE", "/v1/endpoint/{id}", (*Server).deleteEndpoint},
	{"GET", "/v1/identity", (*Server).getIdentity},
	{"GET", "/v1/identity/{id}", (*Server).getIdentityByID},
	{"GET", "/v1/map", (*Server).getMap},
	{"GET", "/v1/ipcache", (*Server).getIPCache},
	{"GET", "/v1/fqdn/cache", (*Server).getFQDNCache},
	{"GET", "/v1/fqdn/cache/{id}", (*Server).getFQDNCache},
	{"GET", "/v1/node", (*Server).getNode},
	{"GET", "/v1/cluster/nodes", (*Server).getClusterNodes},
	{"GET", "/v1/service", (*Server).getService},
	{"GET", "/v1/policy", (*Server).getPolicy},
	{"GET", "/v1/policy/selectors", (*Server).getPolicySelectors},
	{"GET", "/v1/policy/trace", (*Server).getPolicyTrace},
	{"GET", "/v1/monitor", (*Server).getMonitor},
	{"GET", "/v1/metrics/", (*Server).getMetrics},
	{"GET", "/v1/openapi.yaml", (*Server).getOpenAPI},
}

// Handler is the API without the socket, for tests and embedding.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.metrics == nil {
		s.metrics, _ = newAPIMetrics(nil)
	}
	for _, r := range routes {
		h := r.handle
		mux.HandleFunc(r.method+" "+r.path, s.metrics.wrap(r.path, func(w http.ResponseWriter, req *http.Request) { h(s, w, req) }))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no operation %s %s", r.Method, r.URL.Path))
	})
	return mux
}
