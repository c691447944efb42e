package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cilium-go/cilium/pkg/health"
)

func TestHandler(t *testing.T) {
	reg := newRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "cilium_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	h := health.NewRegistry()
	started := new(Started)
	srv := Handler(reg, h, started)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	if rec := get("/metrics"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "cilium_test_total 3") ||
		!strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Fatalf("/metrics: %d\n%s", rec.Code, rec.Body)
	}
	h.Scope("ipam").OK("ready")
	if rec := get("/healthz"); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"starting":true`) {
		t.Fatalf("/healthz before the agent started: %d %s", rec.Code, rec.Body)
	}
	started.Store(true)
	if rec := get("/healthz"); rec.Code != http.StatusOK {
		t.Fatalf("/healthz healthy: %d %s", rec.Code, rec.Body)
	}
	h.Scope("datapath").Degraded("start", errors.New("no bpffs"))
	if rec := get("/healthz"); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no bpffs") {
		t.Fatalf("/healthz degraded: %d %s", rec.Code, rec.Body)
	}
}

func TestConfigValidate(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, ":9962": true, "127.0.0.1:9090": true, "[::1]:80": true,
		"9962": false, "host:port": false, ":70000": false,
	} {
		err := Config{PrometheusServeAddr: addr}.Validate()
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "--prometheus-serve-addr")) {
			t.Errorf("%q: %v", addr, err)
		}
	}
}
