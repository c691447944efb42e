// Package starwars is the lab's quay.io/cilium/starwars: the deathstar of
// Cilium's getting-started demo, an HTTP API on port 80 whose answers the
// demo's commands print ("Ship landed", and the panic of the exhaust
// port that layer-7 policy is there to keep closed).
package starwars

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// api lists the routes, as GET /v1 shows them.
var api = []string{
	"GET   /v1",
	"GET   /v1/healthz",
	"POST  /v1/request-landing",
	"PUT   /v1/cargobay",
	"GET   /v1/hyper-matter-reactor/status",
	"PUT   /v1/exhaust-port",
}

// Handler serves the deathstar's API; hostname names the pod.
func Handler(hostname string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"name": "Death Star", "hostname": hostname, "model": "DS-1 Orbital Battle Station",
			"starship_class": "Deep Space Mobile Battlestation", "api": api,
		})
	})
	mux.HandleFunc("GET /v1/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "OK\n") })
	mux.HandleFunc("POST /v1/request-landing", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Ship landed\n") })
	mux.HandleFunc("PUT /v1/cargobay", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Cargo loaded\n") })
	mux.HandleFunc("GET /v1/hyper-matter-reactor/status", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "Reactor stable\n")
	})
	mux.HandleFunc("PUT /v1/exhaust-port", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "Panic: deathstar exploded\n\ngoroutine 1 [running]:\nmain.HandleGarbage(...)\n")
	})
	return mux
}

// Main serves on --port (80) until SIGTERM or SIGINT.
func Main(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("starwars", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 80, "port to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	hostname, _ := os.Hostname()
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		fmt.Fprintf(stderr, "starwars: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: Handler(hostname), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "starwars: %v\n", err)
		return 1
	}
	return 0
}
