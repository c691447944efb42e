// Package ui is Hubble UI's backend: it serves the page (built from ui/
// and embedded here), streams one namespace's flows from hubble-relay to
// it, and answers what the page asks of the cluster: the namespaces, a
// policy's YAML, and the agent's policy trace for the "why" view.
//
// Everything is read-only. What a flow carries (HTTP paths and headers,
// DNS names, labels) is written by pods, so the page treats it as text
// only, and the answers forbid inline scripts and foreign origins
// (Content-Security-Policy) in case it ever does not.
package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// Tracer is the agent's policy trace (pkg/api/client.Client).
type Tracer interface {
	PolicyTrace(ctx context.Context, src, dst, protocol string, port uint16) (models.PolicyTrace, error)
}

// Server answers the page.
type Server struct {
	Relay   observer.ObserverClient
	Cluster *Cluster
	// Tracer is nil when the "why" view is off.
	Tracer Tracer
	Log    *slog.Logger
	// Assets is the built page; nil: the embedded one.
	Assets fs.FS
}

// Handler routes the page's requests.
func (s *Server) Handler() http.Handler {
	assets := s.Assets
	if assets == nil {
		assets = Assets()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(assets))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("GET /api/namespaces", s.namespaces)
	mux.HandleFunc("GET /api/flows", s.flows)
	mux.HandleFunc("GET /api/policy", s.policy)
	mux.HandleFunc("GET /api/trace", s.trace)
	return secured(mux)
}

// secured adds the headers that keep the page to its own origin.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// status tells the page what the relay sees and whether "why" works.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	out := struct {
		Relay    json.RawMessage `json:"relay,omitempty"`
		RelayErr string          `json:"relayError,omitempty"`
		Trace    bool            `json:"trace"`
	}{Trace: s.Tracer != nil}
	st, err := s.Relay.ServerStatus(ctx, &observer.ServerStatusRequest{})
	if err == nil {
		out.Relay, err = jsonFlow.Marshal(st)
	}
	if err != nil {
		out.RelayErr = err.Error()
	}
	writeJSON(w, out)
}

func (s *Server) namespaces(w http.ResponseWriter, r *http.Request) {
	ns, err := s.Cluster.Namespaces(r.Context())
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, map[string][]string{"namespaces": ns})
}

func (s *Server) policy(w http.ResponseWriter, r *http.Request) {
	ref, err := ParsePolicyRef(r.URL.Query())
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	b, err := s.Cluster.PolicyYAML(r.Context(), ref)
	if err != nil {
		s.fail(w, statusOf(err), err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b)
}

// trace asks the agent; its own checks name a bad source, destination or
// port, and its answer reaches the page as the agent gave it.
func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	if s.Tracer == nil {
		s.fail(w, http.StatusNotFound, errors.New("the policy trace is off (hubble-ui --agent-socket)"))
		return
	}
	q := r.URL.Query()
	port, err := models.ParseTracePort(models.TraceProtocols[strings.ToLower(q.Get("protocol"))], q.Get("dport"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("dport: %w", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	tr, err := s.Tracer.PolicyTrace(ctx, q.Get("src"), q.Get("dst"), strings.ToLower(q.Get("protocol")), port)
	if err != nil {
		s.fail(w, statusOf(err), err)
		return
	}
	writeJSON(w, tr)
}

// flows streams the namespace's flows as server-sent events: "flows"
// events of JSON arrays of GetFlowsResponses, "end" when a window is
// complete, "error" when the relay fails.
func (s *Server) flows(w http.ResponseWriter, r *http.Request) {
	q, err := ParseFlowQuery(r.URL.Query())
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	event := func(name string, data []byte) error {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	err = streamFlows(r.Context(), s.Relay, q, func(batch [][]byte) error {
		var b strings.Builder
		b.WriteByte('[')
		for i, f := range batch {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(f)
		}
		b.WriteByte(']')
		return event("flows", []byte(b.String()))
	})
	switch {
	case err == nil:
		_ = event("end", []byte("{}"))
	case r.Context().Err() == nil:
		s.Log.Warn("flow stream", "namespace", q.Namespace, "error", err)
		msg, _ := json.Marshal(map[string]string{"error": err.Error()})
		_ = event("error", msg)
	}
}

func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		s.Log.Warn("request failed", "error", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// statusOf passes on the code of a 4xx that the agent or the API server
// answered (an unknown pod, a missing policy); anything else is the
// gateway's failure.
func statusOf(err error) int {
	var me *models.Error
	var ae apierrors.APIStatus
	switch {
	case errors.As(err, &me) && me.Code >= 400 && me.Code < 500:
		return me.Code
	case errors.As(err, &ae) && ae.Status().Code >= 400 && ae.Status().Code < 500:
		return int(ae.Status().Code)
	}
	return http.StatusBadGateway
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
