package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// getMonitor streams datapath events, a line of JSON each, flushed as
// they come, until the client goes.
func (s *Server) getMonitor(w http.ResponseWriter, r *http.Request) {
	if s.p.Monitor == nil {
		writeError(w, http.StatusNotImplemented, errors.New("monitor: the agent runs without a datapath"))
		return
	}
	types := r.URL.Query()["type"]
	for _, t := range types {
		if !slices.Contains(models.MonitorEventTypes, t) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("type: %q is not one of %v", t, models.MonitorEventTypes))
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	enc := json.NewEncoder(w)
	err := s.p.Monitor.Stream(r.Context(), types, func(ev models.MonitorEvent) error {
		if err := enc.Encode(ev); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && r.Context().Err() == nil {
		s.p.Log.Debug("monitor stream ended", "error", err)
	}
}
