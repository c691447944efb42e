package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Responder answers the probes: 200 OK to GET /hello, 404 to any other
// path, and nothing more. Whoever reaches the port learns only that the
// node (or its health endpoint) is up.
type Responder struct {
	srv *http.Server
}

// NewResponder is a responder; Serve starts it on a listener.
func NewResponder() *Responder {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HelloPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return &Responder{srv: &http.Server{Handler: mux,
		// Probes are small: a slow or large client gets cut off.
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 10 * time.Second, MaxHeaderBytes: 4096}}
}

// Serve answers on l until Shutdown; it closes l.
func (r *Responder) Serve(l net.Listener) error {
	if err := r.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops every Serve.
func (r *Responder) Shutdown(ctx context.Context) error { return r.srv.Shutdown(ctx) }
