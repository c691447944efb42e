package healthcheck

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
	ciliummodels "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/healthcheck/client"
)

// BasePath is the health API's base path.
const BasePath = client.BasePath

// API serves Cilium's health API: GET /healthz, GET /status and PUT
// /status/probe under BasePath, with the JSON of Cilium's health models.
type API struct {
	checker *Checker
	modules *health.Registry // nil: no module health to tell
	started time.Time
	log     *slog.Logger
}

// NewAPI serves checker's results.
func NewAPI(checker *Checker, modules *health.Registry, log *slog.Logger) *API {
	return &API{checker: checker, modules: modules, started: time.Now(), log: log}
}

// Handler is the API's routes.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+BasePath+"/healthz", a.healthz)
	mux.HandleFunc("GET "+BasePath+"/status", func(w http.ResponseWriter, _ *http.Request) {
		a.write(w, http.StatusOK, a.checker.Status())
	})
	mux.HandleFunc("PUT "+BasePath+"/status/probe", func(w http.ResponseWriter, r *http.Request) {
		a.write(w, http.StatusOK, a.checker.Probe(r.Context()))
	})
	return mux
}

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	res := &healthmodels.HealthResponse{
		Uptime:     time.Since(a.started).Round(time.Second).String(),
		SystemLoad: systemLoad(),
	}
	state, msg := "Ok", ""
	if a.modules != nil {
		if bad := a.modules.Degraded(); len(bad) > 0 {
			state = "Warning"
			var parts []string
			for _, s := range bad {
				parts = append(parts, s.Scope+": "+s.Message)
			}
			msg = strings.Join(parts, "; ")
		}
	}
	res.Cilium = ciliummodels.StatusResponse{Cilium: &ciliummodels.Status{State: state, Msg: msg}}
	a.write(w, http.StatusOK, res)
}

func (a *API) write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		a.log.Debug("health API response", "error", err)
	}
}

// systemLoad reads /proc/loadavg; nil where there is none.
func systemLoad() *healthmodels.LoadResponse {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var l1, l5, l15 string
	if _, err := fmt.Sscan(string(b), &l1, &l5, &l15); err != nil {
		return nil
	}
	return &healthmodels.LoadResponse{Last1min: l1, Last5min: l5, Last15min: l15}
}
