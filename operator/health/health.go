// Package health serves the operator's /healthz for its probes: healthy
// while the API server answers, since without it no controller can work,
// and with whether this replica leads.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/operator/k8s"
	"github.com/cilium-go/cilium/operator/leader"
)

// Cell serves /healthz on --operator-api-serve-addr.
var Cell = cell.Module("operator-api", "The health endpoint of the operator",
	cell.Config(DefaultConfig),
	cell.Invoke(register),
)

// Config says where to serve.
type Config struct {
	OperatorAPIServeAddr string `mapstructure:"operator-api-serve-addr"`
}

// DefaultConfig uses Cilium's operator API port.
var DefaultConfig = Config{OperatorAPIServeAddr: ":9234"}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("operator-api-serve-addr", d.OperatorAPIServeAddr, "host:port of /healthz; empty disables")
}

// Validate names the bad flag.
func (c Config) Validate() error {
	if c.OperatorAPIServeAddr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.OperatorAPIServeAddr); err != nil {
		return fmt.Errorf("--operator-api-serve-addr %q: %w", c.OperatorAPIServeAddr, err)
	}
	return nil
}

// Status is the body of /healthz.
type Status struct {
	OK      bool   `json:"ok"`
	Leading bool   `json:"leading"`
	Error   string `json:"error,omitempty"`
}

// Leader says whether this replica leads; *leader.Elector is one.
type Leader interface{ IsLeader() bool }

// Handler answers /healthz by asking the API server for its version.
func Handler(c k8s.Clients, l Leader) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		st := Status{OK: true, Leading: l.IsLeader()}
		if _, err := c.Kube.Discovery().ServerVersion(); err != nil {
			st.OK, st.Error = false, "API server: "+err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		if !st.OK {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(st)
	})
	return mux
}

type params struct {
	cell.In
	Config    Config
	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Clients   k8s.Clients
	Elector   *leader.Elector
}

func register(p params) error {
	if err := p.Config.Validate(); err != nil {
		return err
	}
	if p.Config.OperatorAPIServeAddr == "" {
		return nil
	}
	srv := &http.Server{Handler: Handler(p.Clients, p.Elector), ReadHeaderTimeout: 10 * time.Second}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := net.Listen("tcp", p.Config.OperatorAPIServeAddr)
			if err != nil {
				return fmt.Errorf("--operator-api-serve-addr %s: %w", p.Config.OperatorAPIServeAddr, err)
			}
			p.Log.Info("serving /healthz", "address", ln.Addr().String())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(context.Context(ctx)) },
	})
	return nil
}
