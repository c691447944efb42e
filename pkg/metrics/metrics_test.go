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
	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := get(path); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"starting":true`) {
			t.Fatalf("%s before the agent started: %d %s", path, rec.Code, rec.Body)
		}
	}
	started.Store(true)
	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := get(path); rec.Code != http.StatusOK {
			t.Fatalf("%s healthy: %d %s", path, rec.Code, rec.Body)
		}
	}
}

// TestLivenessIsNotReadiness: a degraded module (the API server gone, a
// full map, an incomplete restore) makes the agent not ready, naming the
// module, but never not live: a liveness failure restarts the agent.
func TestLivenessIsNotReadiness(t *testing.T) {
	h := health.NewRegistry()
	started := new(Started)
	started.Store(true)
	srv := Handler(newRegistry(), h, started)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	h.Scope("ipam").OK("ready")
	h.Scope("k8s").Degraded("sync failed", errors.New("apiserver unreachable"))
	if rec := get("/healthz"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ok":true`) {
		t.Fatalf("/healthz (liveness) with a degraded module: %d %s, want 200", rec.Code, rec.Body)
	}
	rec := get("/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"scope":"k8s"`) ||
		!strings.Contains(rec.Body.String(), "apiserver unreachable") || strings.Contains(rec.Body.String(), `"scope":"ipam"`) {
		t.Fatalf("/readyz (readiness) with a degraded module: %d %s, want 503 naming k8s only", rec.Code, rec.Body)
	}
	h.Scope("k8s").OK("synced")
	if rec := get("/readyz"); rec.Code != http.StatusOK {
		t.Fatalf("/readyz once the module recovered: %d %s", rec.Code, rec.Body)
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
