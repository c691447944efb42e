package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
)

// getMetrics is Cilium's GET /v1/metrics/: the agent's metrics, each
// sample one Metric of Cilium's model.
func (s *Server) getMetrics(w http.ResponseWriter, _ *http.Request) {
	if s.p.Registry == nil {
		writeJSON(w, http.StatusOK, ciliumapi.Metrics(nil))
		return
	}
	families, err := s.p.Registry.Gather()
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("gather metrics: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, ciliumapi.Metrics(families))
}

// apiMetrics times every request, as Cilium's
// cilium_agent_api_process_time_seconds does.
type apiMetrics struct {
	seconds *prometheus.HistogramVec
}

func newAPIMetrics(reg *prometheus.Registry) (*apiMetrics, error) {
	m := &apiMetrics{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cilium_agent_api_process_time_seconds", Help: "Time the agent took for API requests",
	}, []string{"path", "method", "return_code"})}
	if reg == nil {
		return m, nil
	}
	return m, reg.Register(m.seconds)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection: GET
// /v1/monitor flushes each event.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// wrap times h under the route's pattern, not the raw path, so that ids
// do not explode the label space.
func (m *apiMetrics) wrap(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r)
		m.seconds.WithLabelValues(pattern, r.Method, strconv.Itoa(rec.code)).Observe(time.Since(start).Seconds())
	}
}
