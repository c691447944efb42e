// Package pprof serves Go's runtime profiles (net/http/pprof) when
// --pprof is set, on --pprof-address and --pprof-port as Cilium's agent
// does: where an agent spends its CPU is a question for the node it runs on.
package pprof

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
)

// Cell runs the profile server when enabled.
var Cell = cell.Module("pprof", "Go runtime profiles over HTTP",
	cell.Config(DefaultConfig),
	cell.Invoke(register),
)

// Config says whether and where to serve.
type Config struct {
	Pprof        bool   `mapstructure:"pprof"`
	PprofAddress string `mapstructure:"pprof-address"`
	PprofPort    uint16 `mapstructure:"pprof-port"`
}

// DefaultConfig: off; on, only this node's loopback, Cilium's port.
var DefaultConfig = Config{PprofAddress: "localhost", PprofPort: 6060}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.Bool("pprof", d.Pprof, "serve Go runtime profiles under /debug/pprof/")
	fs.String("pprof-address", d.PprofAddress, "address the profiles are served on")
	fs.Uint16("pprof-port", d.PprofPort, "port the profiles are served on (0: any free port)")
}

// Handler serves the profiles under /debug/pprof/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func register(lc cell.Lifecycle, log *slog.Logger, c Config) {
	if !c.Pprof {
		return
	}
	addr := net.JoinHostPort(c.PprofAddress, strconv.Itoa(int(c.PprofPort)))
	// No write timeout: a CPU profile or a trace streams for as long as
	// its seconds parameter asks.
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--pprof-address, --pprof-port: listen on %s: %w", addr, err)
			}
			log.Info("serving Go runtime profiles", "address", ln.Addr().String())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(context.Context(ctx)) },
	})
}
