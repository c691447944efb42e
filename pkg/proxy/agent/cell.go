// Package agent is the agent's side of the layer-7 proxy, which runs as
// its own process (cmd/cilium-proxy) so that an agent restart loses no
// lookup and no request: the flags that both read, the policy engine's
// proxy ports, and the proxy's policy, which the agent writes into a
// file of the proxy's directory whenever it changes. The file outlives
// both processes: a restarted proxy judges by it before the agent is
// back. The proxy acknowledges each policy it loads on the agent's
// socket, into the table that holds the policy map's redirects back
// until the proxy knows them (policyagent.ProxyAckRow).
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/proxy"
)

// Config holds the flags of the layer-7 proxy that the agent and the
// proxy share (both read cilium-config).
type Config struct {
	// EnableL7Proxy is Cilium's: without it, layer-7 rules and toFQDNs
	// are refused.
	EnableL7Proxy bool `mapstructure:"enable-l7-proxy"`
	// ToFQDNsProxyPort is the DNS proxy's port (Cilium's flag; the
	// standalone proxy needs a fixed one, so 0 is refused).
	ToFQDNsProxyPort uint16 `mapstructure:"tofqdns-proxy-port"`
	// ProxyHTTPPort is the HTTP proxy's port for egress rules,
	// ProxyHTTPIngressPort for ingress rules.
	ProxyHTTPPort        uint16 `mapstructure:"proxy-http-port"`
	ProxyHTTPIngressPort uint16 `mapstructure:"proxy-http-ingress-port"`
	// ProxyDir holds the proxy's policy file and the agent's sockets
	// for it, on a directory both see; empty: "proxy" beside the API's
	// socket (/var/run/cilium/proxy).
	ProxyDir string `mapstructure:"proxy-dir"`
}

// DefaultConfig: the proxy on, at ports of Cilium's proxy port range.
var DefaultConfig = Config{EnableL7Proxy: true, ToFQDNsProxyPort: proxy.DefaultDNSPort, ProxyHTTPPort: proxy.DefaultHTTPPort,
	ProxyHTTPIngressPort: proxy.DefaultHTTPIngressPort}

// Dir is the proxy's directory.
func (c Config) Dir(p paths.Config) string {
	if c.ProxyDir != "" {
		return c.ProxyDir
	}
	return filepath.Join(filepath.Dir(p.SocketPath), "proxy")
}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.Bool("enable-l7-proxy", def.EnableL7Proxy, "Send the connections of allows with layer-7 rules (and DNS for toFQDNs) to the layer-7 proxy; without it such policies are refused")
	flags.Uint16("tofqdns-proxy-port", def.ToFQDNsProxyPort, "Port of the DNS proxy (UDP and TCP) on every node")
	flags.Uint16("proxy-http-port", def.ProxyHTTPPort, "Port of the HTTP proxy for egress rules on every node")
	flags.Uint16("proxy-http-ingress-port", def.ProxyHTTPIngressPort, "Port of the HTTP proxy for ingress rules on every node")
	flags.String("proxy-dir", def.ProxyDir, "Directory of the layer-7 proxy's policy file and of the agent's sockets for it (default: proxy beside --socket-path)")
}

// Validate names the bad flag.
func (c Config) Validate() error {
	if !c.EnableL7Proxy {
		return nil
	}
	ports := []struct {
		flag string
		port uint16
	}{{"tofqdns-proxy-port", c.ToFQDNsProxyPort}, {"proxy-http-port", c.ProxyHTTPPort}, {"proxy-http-ingress-port", c.ProxyHTTPIngressPort}}
	for i, p := range ports {
		if p.port == 0 {
			return fmt.Errorf("--%s 0: the standalone proxy needs a fixed port", p.flag)
		}
		for _, q := range ports[:i] {
			if q.port == p.port {
				return fmt.Errorf("--%s %d is --%s's too", p.flag, p.port, q.flag)
			}
		}
	}
	switch {
	case c.ProxyDir != "" && !filepath.IsAbs(c.ProxyDir):
		return fmt.Errorf("--proxy-dir %q: want an absolute path", c.ProxyDir)
	}
	return nil
}

// Ports are the engine's proxy ports, nil without the proxy.
func (c Config) Ports() *policy.ProxyPorts {
	if !c.EnableL7Proxy {
		return nil
	}
	return &policy.ProxyPorts{HTTP: c.ProxyHTTPPort, HTTPIngress: c.ProxyHTTPIngressPort, DNS: c.ToFQDNsProxyPort}
}

// Cell provides the proxy's flags and ports, writes its policy and
// takes its acknowledgements.
var Cell = cell.Module("l7-proxy", "Layer-7 proxy flags and policy file and acknowledgements",
	cell.Config(DefaultConfig),
	cell.Invoke(Config.Validate),
	cell.Provide(Config.Ports),
	health.JobGroup,
	cell.Invoke(registerPolicyWriter),
)

type writerParams struct {
	cell.In
	Config    Config
	Paths     paths.Config
	Log       *slog.Logger
	DB        *statedb.DB
	Jobs      job.Group
	Policies  statedb.Table[*policyagent.EndpointPolicyRow]
	Endpoints statedb.Table[*endpoint.EndpointRow]
	// Entries is initialized once the engine wrote its first policy: a
	// restarted agent must not hand the proxy the empty policy of its
	// first moments, which would deny what the proxy allows meanwhile.
	Entries statedb.Table[*policyagent.PolicyEntryRow]
	// Acks holds what the proxy acknowledged of this run's policies.
	Acks statedb.RWTable[*policyagent.ProxyAckRow]
}

func registerPolicyWriter(p writerParams) {
	if !p.Config.EnableL7Proxy {
		return
	}
	dir := p.Config.Dir(p.Paths)
	path := proxy.PolicyFile(dir)
	run := newRun()
	p.Jobs.Add(job.OneShot("l7-proxy-acks", func(ctx context.Context, _ cell.Health) error {
		return serveAcks(ctx, proxy.AckSocket(dir), run, p.DB, p.Acks, p.Log)
	}))
	var last []byte
	var lastRevision uint64
	// The entries are waited for, not watched: the policy table changes
	// with them.
	never := make(chan struct{})
	engineStarted := desired.Input{Table: p.Entries, Watch: func(statedb.ReadTxn) <-chan struct{} { return never }}
	desired.Controller(p.Jobs, "l7-proxy-policy", p.DB,
		[]desired.Input{desired.TableInput(p.Policies), desired.TableInput(p.Endpoints), engineStarted},
		func(ctx context.Context, txn statedb.ReadTxn) error {
			pol := ProxyPolicy(txn, p.Policies, p.Endpoints)
			// Never lower: a policy that lost its latest endpoint
			// still knows all that came before.
			pol.Revision = max(pol.Revision, lastRevision)
			pol.Run = run
			b, err := json.MarshalIndent(pol, "", " ")
			if err != nil {
				return err
			}
			if bytes.Equal(b, last) {
				return nil
			}
			if err := writeFile(path, b); err != nil {
				return err
			}
			last, lastRevision = b, pol.Revision
			return nil
		})
}

// newRun names this agent's run in the policies it writes: any number
// but 0, which names none.
func newRun() uint64 {
	for {
		if r := rand.Uint64(); r != 0 {
			return r
		}
	}
}

// ProxyPolicy is the proxy's policy as of txn: the local endpoints with
// ports that go through the proxy. Its Revision is the latest of every
// endpoint policy with such ports, so that a proxy that acknowledges
// revision r or later knows the layer-7 ports of every policy of
// revision r (policyagent.ProxyAckRow).
func ProxyPolicy(txn statedb.ReadTxn, policies statedb.Table[*policyagent.EndpointPolicyRow], eps statedb.Table[*endpoint.EndpointRow]) proxy.Policy {
	var out proxy.Policy
	rows := map[uint16]*policyagent.EndpointPolicyRow{}
	for row := range policies.All(txn) {
		if len(row.L7) > 0 {
			rows[row.EndpointID] = row
			out.Revision = max(out.Revision, row.Revision)
		}
	}
	for ep := range endpoint.Live(txn, eps) {
		row := rows[ep.ID]
		if row == nil || !ep.IPv4.IsValid() {
			continue
		}
		out.Endpoints = append(out.Endpoints, proxy.Endpoint{ID: ep.ID, Identity: row.Identity, IPv4: ep.IPv4, Ports: row.L7})
	}
	slices.SortFunc(out.Endpoints, func(a, b proxy.Endpoint) int { return int(a.ID) - int(b.ID) })
	return out
}

// writeFile replaces path whole: a reader sees the old file or the new.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("proxy policy: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		return fmt.Errorf("proxy policy: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("proxy policy: %w", err)
	}
	return nil
}
