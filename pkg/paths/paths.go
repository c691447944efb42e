// Package paths holds where the agent keeps its files: the state directory
// that survives restarts, the API socket and the bpffs directory of its
// pins. Every other cell takes these from here instead of a flag of its own.
package paths

import (
	"fmt"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
)

// Cell provides Config.
var Cell = cell.Module("paths", "Agent state dir and socket and bpffs paths",
	cell.Config(DefaultConfig),
	cell.Invoke(Config.Validate),
)

// Config is the agent's file layout.
type Config struct {
	StateDir   string `mapstructure:"state-dir"`
	SocketPath string `mapstructure:"socket-path"`
	BPFRoot    string `mapstructure:"bpf-root"`
}

// DefaultConfig is Cilium's layout.
var DefaultConfig = Config{
	StateDir:   "/var/lib/cilium",
	SocketPath: "/var/run/cilium/cilium.sock",
	BPFRoot:    "/sys/fs/bpf/cilium",
}

// Flags implements cell.Flagger.
func (d Config) Flags(fs *pflag.FlagSet) {
	fs.String("state-dir", d.StateDir, "directory for state that survives agent restarts (endpoints, IPAM)")
	fs.String("socket-path", d.SocketPath, "unix socket the REST API listens on")
	fs.String("bpf-root", d.BPFRoot, "directory on a bpffs for this node's pinned maps and links")
}

// Validate names the first bad flag.
func (c Config) Validate() error {
	for _, f := range []struct{ flag, v string }{
		{"state-dir", c.StateDir}, {"socket-path", c.SocketPath}, {"bpf-root", c.BPFRoot},
	} {
		if !filepath.IsAbs(f.v) {
			return fmt.Errorf("--%s: %q is not an absolute path", f.flag, f.v)
		}
	}
	return nil
}
