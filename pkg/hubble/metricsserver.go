package hubble

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cilium-go/cilium/pkg/hubble/metrics"
)

// metricsCell counts flows into --hubble-metrics and serves them on
// --hubble-metrics-server, in a registry of their own as Cilium's.
var metricsCell = cell.Module("metrics-server", "Flow metrics served to Prometheus",
	cell.Provide(newMetrics),
)

// newMetrics is nil without Hubble or without metrics; a hook serves them.
func newMetrics(c Config, lc cell.Lifecycle, log *slog.Logger) (*metrics.Metrics, error) {
	if !c.EnableHubble {
		return nil, nil
	}
	specs, err := metrics.Parse(c.HubbleMetrics)
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
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := net.Listen("tcp", c.HubbleMetricsServer)
			if err != nil {
				return fmt.Errorf("--hubble-metrics-server: %w", err)
			}
			log.Info("serving Hubble metrics", "address", ln.Addr().String(), "metrics", c.HubbleMetrics)
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(ctx) },
	})
	return m, nil
}
