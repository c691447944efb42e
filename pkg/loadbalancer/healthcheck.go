package loadbalancer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// NeedsHealthCheck says whether s gets a healthCheckNodePort server: a
// LoadBalancer with externalTrafficPolicy Local, which the API server
// gives the port, and which kube-proxy would serve. A load balancer in
// front of the nodes asks each node there whether it has an endpoint of
// the service, and sends its clients only to nodes that do.
func NeedsHealthCheck(s Service) bool {
	return Ours(s) && s.Type == TypeLoadBalancer && s.ExternalLocal && s.HealthCheckNodePort != 0
}

// LocalReady counts the endpoints of s on the node named node that are
// ready and serve one of its ports, by address (an endpoint with two
// ports is one): what a healthCheckNodePort reports. Terminating
// endpoints that still serve do not count, so that a node whose pods are
// all going away fails its health check and is drained.
func LocalReady(s Service, eps []Endpoint, node string) int {
	seen := map[netip.Addr]bool{}
	for _, e := range eps {
		if e.NodeName == node && readyFor(s, e) {
			seen[e.Address] = true
		}
	}
	return len(seen)
}

// ReadyNodes are the nodes that have an endpoint of s that LocalReady
// counts, sorted.
func ReadyNodes(s Service, eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		if e.NodeName != "" && readyFor(s, e) && !slices.Contains(out, e.NodeName) {
			out = append(out, e.NodeName)
		}
	}
	slices.Sort(out)
	return out
}

// readyFor says whether e is ready and serves one of s's ports.
func readyFor(s Service, e Endpoint) bool {
	if !e.Ready || !e.Address.Is4() {
		return false
	}
	for _, p := range s.Ports {
		if e.Ports[PortKey{Name: p.Name, Protocol: p.Protocol}] != 0 {
			return true
		}
	}
	return false
}

// ListenFunc opens a TCP listener at an address.
type ListenFunc func(netip.AddrPort) (net.Listener, error)

func listenTCP(a netip.AddrPort) (net.Listener, error) { return net.Listen("tcp4", a.String()) }

// healthChecks serves the healthCheckNodePorts of the services table's
// services on the node's addresses: one HTTP server per port and
// address, opened and closed as services come, go or change port. A port
// that cannot be opened (another process has it) is reported and tried
// again, never fatal.
type healthChecks struct {
	db       *statedb.DB
	services statedb.Table[*ServiceRow]
	addrs    []netip.Addr
	log      *slog.Logger
	listen   ListenFunc
	// retry is how soon a port that could not be opened is tried again.
	retry time.Duration

	// open are the services served, owned by run's goroutine.
	open map[ServiceName]*healthCheck
}

func newHealthChecks(db *statedb.DB, services statedb.Table[*ServiceRow], addrs []netip.Addr, log *slog.Logger) *healthChecks {
	return &healthChecks{db: db, services: services, addrs: addrs, log: log, listen: listenTCP,
		retry: 5 * time.Second, open: map[ServiceName]*healthCheck{}}
}

// healthCheck is one service's servers.
type healthCheck struct {
	name    ServiceName
	port    uint16
	servers []*http.Server
	// endpoints is the number of local ready endpoints.
	endpoints atomic.Int64
}

// run follows the services table until ctx ends, then closes every
// server.
func (h *healthChecks) run(ctx context.Context, health cell.Health) error {
	defer h.closeAll()
	var reported string
	for {
		rows, watch := h.services.AllWatch(h.db.ReadTxn())
		want := map[ServiceName]*ServiceRow{}
		for r := range rows {
			if NeedsHealthCheck(r.Service) {
				want[r.Name] = r
			}
		}
		var retry <-chan time.Time
		if err := h.sync(want); err != nil {
			health.Degraded("healthCheckNodePorts not served", err)
			if err.Error() != reported {
				h.log.Warn("healthCheckNodePorts not served, trying again", "error", err)
				reported = err.Error()
			}
			retry = time.After(h.retry)
		} else {
			health.OK(fmt.Sprintf("%d healthCheckNodePorts served", len(h.open)))
			reported = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		case <-retry:
		}
	}
}

// sync closes the servers of services gone or moved to another port,
// opens those of new ones and updates every count. It names every port
// it could not open.
func (h *healthChecks) sync(want map[ServiceName]*ServiceRow) error {
	for n, hc := range h.open {
		if r, ok := want[n]; !ok || r.HealthCheckNodePort != hc.port {
			hc.close()
			delete(h.open, n)
			h.log.Info("healthCheckNodePort closed", "service", n, "port", hc.port)
		}
	}
	var errs []error
	for _, n := range slices.SortedFunc(maps.Keys(want), cmpNames) {
		r := want[n]
		hc := h.open[n]
		if hc == nil {
			var err error
			if hc, err = h.serve(n, r.HealthCheckNodePort); err != nil {
				errs = append(errs, fmt.Errorf("healthCheckNodePort %d of %s: %w", r.HealthCheckNodePort, n, err))
				continue
			}
			h.open[n] = hc
			h.log.Info("healthCheckNodePort opened", "service", n, "port", hc.port)
		}
		hc.endpoints.Store(int64(r.LocalReady))
	}
	return errors.Join(errs...)
}

// serve opens the service's port on every node address, or none.
func (h *healthChecks) serve(n ServiceName, port uint16) (*healthCheck, error) {
	if len(h.addrs) == 0 {
		return nil, errors.New("no node address to listen on")
	}
	hc := &healthCheck{name: n, port: port}
	for _, a := range h.addrs {
		l, err := h.listen(netip.AddrPortFrom(a, port))
		if err != nil {
			hc.close()
			return nil, err
		}
		srv := &http.Server{Handler: hc, ReadHeaderTimeout: 10 * time.Second}
		hc.servers = append(hc.servers, srv)
		go func() { _ = srv.Serve(l) }() // ends with ErrServerClosed
	}
	return hc, nil
}

func (hc *healthCheck) close() {
	for _, s := range hc.servers {
		_ = s.Close()
	}
}

func (h *healthChecks) closeAll() {
	for n, hc := range h.open {
		hc.close()
		delete(h.open, n)
	}
}

// healthCheckBody is the answer's JSON, as kube-proxy's.
type healthCheckBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// ServeHTTP answers any request as kube-proxy does: 200 while the node
// has a ready endpoint of the service, 503 otherwise, with the count in
// a header (which load balancers may weigh nodes by) and in the body.
// The proxy is healthy: the tables only hold what the agent has written.
func (hc *healthCheck) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := int(hc.endpoints.Load())
	var body healthCheckBody
	body.Service.Namespace, body.Service.Name = hc.name.Namespace, hc.name.Name
	body.LocalEndpoints, body.ServiceProxyHealthy = n, true
	b, err := json.MarshalIndent(body, "", "\t")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(n))
	status := http.StatusOK
	if n == 0 {
		status = http.StatusServiceUnavailable
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
