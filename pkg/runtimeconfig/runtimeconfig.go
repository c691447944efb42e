// Package runtimeconfig writes the agent's configuration where Cilium's
// agent writes its own, <run dir>/state/agent-runtime-config.json (the
// run dir is the API socket's, /var/run/cilium), in the shape of Cilium's
// DaemonConfig: cilium-cli's connectivity test reads it there, by `cat` in
// the agent pod, to learn which features the agent has. The file holds only
// the fields below, each from the agent's real flags, and claims no feature
// the agent lacks.
package runtimeconfig

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	"github.com/cilium-go/cilium/pkg/paths"
)

// Cell writes the file when the agent starts.
var Cell = cell.Module("runtime-config", "The agent configuration where Cilium tools read it",
	cell.Invoke(register),
)

// FileName is Cilium's name of the file, in the state directory under the
// run directory.
const FileName = "agent-runtime-config.json"

// Path is where the agent whose API socket is socketPath writes the file.
func Path(socketPath string) string {
	return filepath.Join(filepath.Dir(socketPath), "state", FileName)
}

// Config is the file's content: fields of Cilium's DaemonConfig, by its
// Go names, as Cilium encodes them.
type Config struct {
	// Read by cilium-cli for feature detection.
	MonitorAggregation               string
	EnableICMPRules                  bool
	EnableHealthChecking             bool
	EnableEndpointHealthChecking     bool
	EncryptNode                      bool
	NodeEncryptionOptOutLabelsString string
	EnableK8sNetworkPolicy           bool
	EnableK8sClusterNetworkPolicy    bool

	// What else the agent runs with, by Cilium's names.
	ClusterName             string
	EnablePolicy            string
	RoutingMode             string
	TunnelProtocol          string
	TunnelPort              int
	DatapathMode            string
	EnableIPv4              bool
	EnableIPv6              bool
	EnableIPv4Masquerade    bool
	EnableBPFMasquerade     bool
	EnableHostLegacyRouting bool
	KubeProxyReplacement    string
	EnableSocketLB          bool
	EnableHubble            bool
	EnableL7Proxy           bool
	EnableIPSec             bool
	EnableWireguard         bool
}

// FromFlags is the configuration of the agent whose flags fs holds.
// Encryption, the L7 proxy, IPv6 and ClusterNetworkPolicy are not in
// cilium-go: they are off. Health checking is on as its flags say; the
// health endpoint needs Kubernetes (its address is published in the
// node's CiliumNode), so without it only the nodes are probed. ICMP rules (icmps) are enforced.
// k8s tells whether the agent has Kubernetes.
func FromFlags(fs *pflag.FlagSet, k8s bool) Config {
	str := func(name string) string {
		if f := fs.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	on := func(name string) bool { return str(name) == "true" }
	c := Config{
		MonitorAggregation:      str("monitor-aggregation"),
		EnableICMPRules:         true,
		EnableK8sNetworkPolicy:  k8s,
		ClusterName:             str("cluster-name"),
		EnablePolicy:            str("enable-policy"),
		RoutingMode:             str("routing-mode"),
		DatapathMode:            str("datapath-mode"),
		EnableIPv4:              on("enable-ipv4"),
		EnableIPv4Masquerade:    on("enable-ipv4-masquerade"),
		EnableHostLegacyRouting: on("enable-host-legacy-routing"),
		KubeProxyReplacement:    strconv.FormatBool(on("kube-proxy-replacement")),
		EnableSocketLB:          on("kube-proxy-replacement") && on("bpf-lb-sock"),
		EnableHubble:            on("enable-hubble"),
		EnableHealthChecking:    on("enable-health-checking"),
	}
	c.EnableEndpointHealthChecking = c.EnableHealthChecking && k8s && on("enable-endpoint-health-checking")
	// The datapath masquerades itself: no iptables.
	c.EnableBPFMasquerade = c.EnableIPv4Masquerade
	if c.RoutingMode == "tunnel" {
		c.TunnelProtocol = "vxlan"
		c.TunnelPort, _ = strconv.Atoi(str("tunnel-port"))
	}
	return c
}

type params struct {
	cell.In
	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Paths     paths.Config
	Flags     *pflag.FlagSet
	// Clients are there when the agent has Kubernetes.
	Clients *k8sagent.Clients `optional:"true"`
}

func register(p params) {
	p.Lifecycle.Append(cell.Hook{OnStart: func(cell.HookContext) error {
		path := Path(p.Paths.SocketPath)
		if err := Write(path, FromFlags(p.Flags, p.Clients != nil)); err != nil {
			return err
		}
		p.Log.Info("wrote runtime configuration", "file", path)
		return nil
	}})
}

// Write replaces the file at path with c atomically: a reader sees the
// old file or the new one, never a part.
func Write(path string, c Config) error {
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return fmt.Errorf("encode runtime config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+FileName+"-*")
	if err != nil {
		return fmt.Errorf("write runtime config: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename: nothing
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	return nil
}
