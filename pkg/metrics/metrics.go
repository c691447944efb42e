// Package metrics serves the agent's Prometheus metrics and its probes on
// one TCP address: /healthz for liveness and /readyz for readiness. Cells
// register their collectors on the *prometheus.Registry this package
// provides.
//
// Liveness is not readiness. /healthz fails only while the agent has not
// finished starting: a live agent whose module is degraded (the API server
// gone, a full map, an incomplete restore) still programs its datapath,
// and restarting it would only take that away. /readyz fails while any
// module is degraded and names the modules, as `cilium-dbg status` does.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/health"
)

// Cell provides the registry and runs the server.
var Cell = cell.Module("metrics", "Prometheus metrics and the liveness and readiness probes",
	cell.Config(DefaultConfig),
	cell.Provide(newRegistry, func() *Started { return new(Started) }),
	cell.Invoke(registerServer),
)

// Started says whether every start hook of the agent has run; both probes
// fail until then, so that neither passes while the agent still restores
// endpoints or waits for its pod CIDR.
type Started struct{ atomic.Bool }

// MarkStarted goes last in the agent's cells: its start hook runs after
// every other one.
var MarkStarted = cell.Invoke(func(lc cell.Lifecycle, s *Started) {
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error { s.Store(true); return nil },
		OnStop:  func(cell.HookContext) error { s.Store(false); return nil },
	})
})

// Config says where to serve.
type Config struct {
	// PrometheusServeAddr is host:port; empty turns the server off.
	PrometheusServeAddr string `mapstructure:"prometheus-serve-addr"`
}

// DefaultConfig uses Cilium's agent metrics port.
var DefaultConfig = Config{PrometheusServeAddr: ":9962"}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("prometheus-serve-addr", d.PrometheusServeAddr,
		"host:port for /metrics, /healthz (liveness) and /readyz (readiness); empty disables")
}

// Validate names the bad flag.
func (c Config) Validate() error {
	if c.PrometheusServeAddr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(c.PrometheusServeAddr)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		return fmt.Errorf("--prometheus-serve-addr %q: %w", c.PrometheusServeAddr, err)
	}
	return nil
}

func newRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves /metrics from reg, /healthz (liveness) from started and
// /readyz (readiness) from h and started.
func Handler(reg *prometheus.Registry, h *health.Registry, started *Started) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		up := started.Load()
		writeProbe(w, probe{OK: up, Starting: !up})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		up := started.Load()
		bad := h.Degraded()
		writeProbe(w, probe{OK: up && len(bad) == 0, Starting: !up, Degraded: bad})
	})
	return mux
}

// probe is the body of both probes.
type probe struct {
	OK       bool            `json:"ok"`
	Starting bool            `json:"starting,omitempty"`
	Degraded []health.Status `json:"degraded,omitempty"`
}

func writeProbe(w http.ResponseWriter, p probe) {
	w.Header().Set("Content-Type", "application/json")
	if !p.OK {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(p)
}

type serverParams struct {
	cell.In
	Config    Config
	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Registry  *prometheus.Registry
	Health    *health.Registry
	Started   *Started
}

func registerServer(p serverParams) error {
	if err := p.Config.Validate(); err != nil {
		return err
	}
	if p.Config.PrometheusServeAddr == "" {
		return nil
	}
	srv := &http.Server{Handler: Handler(p.Registry, p.Health, p.Started), ReadHeaderTimeout: 10 * time.Second}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := net.Listen("tcp", p.Config.PrometheusServeAddr)
			if err != nil {
				return fmt.Errorf("metrics listen on %s: %w", p.Config.PrometheusServeAddr, err)
			}
			p.Log.Info("serving metrics", "address", ln.Addr().String())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(context.Context(ctx)) },
	})
	return nil
}
