// Package cniconf writes the node's CNI network configuration once the
// agent can serve it. A kubelet treats the node as network-ready as soon
// as a configuration exists, so the file must not appear before the
// agent's API, IPAM and datapath are up.
package cniconf

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/paths"
)

// Cell writes the configuration at the end of the agent's start.
var Cell = cell.Module("cni-config", "The CNI configuration of this node written when the agent is ready",
	cell.Config(DefaultConfig),
	cell.Invoke(register),
)

// Config says where the configuration goes.
type Config struct {
	WriteCNIConfWhenReady string `mapstructure:"write-cni-conf-when-ready"`
}

// DefaultConfig writes nothing: a runtime without our configuration is
// the operator's choice.
var DefaultConfig = Config{}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("write-cni-conf-when-ready", d.WriteCNIConfWhenReady,
		"write the cilium CNI network configuration to this file once the agent is ready, e.g. /etc/cni/net.d/05-cilium.conflist")
}

// ConfList is the network configuration list that runs cilium-cni
// against the agent's socket.
func ConfList(socketPath string) ([]byte, error) {
	b, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.1.0",
		"name":       "cilium",
		"plugins":    []map[string]any{{"type": "cilium-cni", "socket-path": socketPath}},
	}, "", "  ")
	return append(b, '\n'), err
}

type params struct {
	cell.In
	Config    Config
	Paths     paths.Config
	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	// The API and the endpoint manager start before this cell's hook:
	// when the file appears, CNI ADDs can be served.
	API       *server.Server
	Endpoints *endpoint.Manager
}

func register(p params) error {
	path := p.Config.WriteCNIConfWhenReady
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("--write-cni-conf-when-ready %q: an absolute path is required", path)
	}
	b, err := ConfList(p.Paths.SocketPath)
	if err != nil {
		return err
	}
	// The file stays when the agent stops: pods keep working across an
	// agent restart, and the runtime's CNI calls wait on the socket.
	p.Lifecycle.Append(cell.Hook{OnStart: func(cell.HookContext) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("--write-cni-conf-when-ready: %w", err)
		}
		if err := paths.WriteFileAtomic(path, b); err != nil {
			return fmt.Errorf("--write-cni-conf-when-ready: %w", err)
		}
		p.Log.Info("CNI configuration written", "path", path)
		return nil
	}})
	return nil
}
