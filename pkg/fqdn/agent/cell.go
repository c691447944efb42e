package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/proxy"
	proxyagent "github.com/cilium-go/cilium/pkg/proxy/agent"
	"github.com/cilium-go/cilium/pkg/unixsock"
)

// Config holds Cilium's --tofqdns-* flags of the name cache.
type Config struct {
	ToFQDNsMinTTL                       int           `mapstructure:"tofqdns-min-ttl"`
	ToFQDNsMaxIPsPerHost                int           `mapstructure:"tofqdns-endpoint-max-ip-per-hostname"`
	ToFQDNsIdleConnectionGracePeriod    time.Duration `mapstructure:"tofqdns-idle-connection-grace-period"`
	ToFQDNsMaxDeferredConnectionDeletes int           `mapstructure:"tofqdns-max-deferred-connection-deletes"`
}

// DefaultConfig is Cilium's.
var DefaultConfig = Config{ToFQDNsMaxIPsPerHost: 1000, ToFQDNsMaxDeferredConnectionDeletes: 10000}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.Int("tofqdns-min-ttl", def.ToFQDNsMinTTL, "The minimum time, in seconds, to use DNS data for toFQDNs policies (0: the answers' TTLs)")
	flags.Int("tofqdns-endpoint-max-ip-per-hostname", def.ToFQDNsMaxIPsPerHost, "Maximum number of IPs to keep per name for each endpoint")
	flags.Duration("tofqdns-idle-connection-grace-period", def.ToFQDNsIdleConnectionGracePeriod, "How long an expired address stays allowed after the last connection that used it")
	flags.Int("tofqdns-max-deferred-connection-deletes", def.ToFQDNsMaxDeferredConnectionDeletes, "Maximum number of expired addresses kept for their open connections")
}

func (c Config) cache() fqdn.CacheConfig {
	return fqdn.CacheConfig{MinTTL: time.Duration(c.ToFQDNsMinTTL) * time.Second, MaxIPsPerName: c.ToFQDNsMaxIPsPerHost,
		IdleGrace: c.ToFQDNsIdleConnectionGracePeriod, MaxZombies: c.ToFQDNsMaxDeferredConnectionDeletes}
}

// cacheFile keeps the cache across agent restarts.
func cacheFile(p paths.Config) string { return filepath.Join(p.StateDir, "fqdn-cache.json") }

// Cell runs the name manager when the layer-7 proxy is on.
var Cell = cell.Module("fqdn", "toFQDNs names learned by the DNS proxy for the policy engine",
	cell.Config(DefaultConfig),
	cell.Provide(newManager),
	health.JobGroup,
	cell.Invoke(func(*NameManager) {}),
)

type params struct {
	cell.In
	Config    Config
	Proxy     proxyagent.Config
	Paths     paths.Config
	Log       *slog.Logger
	DB        *statedb.DB
	Jobs      job.Group
	IPCache   statedb.Table[*ipcache.EntryRow]
	Endpoints statedb.Table[*endpoint.EndpointRow]
	Policy    Policy
	// Conntrack is the datapath's; without it no expired address is
	// kept for its connections.
	Conntrack Conntrack `optional:"true"`
}

// newManager restores the cache (the engine gets its names before its
// first policy) and serves the proxy's lookups; nil without the proxy.
func newManager(p params) (*NameManager, error) {
	if !p.Proxy.EnableL7Proxy {
		return nil, nil
	}
	m := newNameManager(p.Log, p.DB, p.IPCache, p.Endpoints, p.Policy, p.Conntrack, p.Config.cache(), cacheFile(p.Paths))
	if err := m.restore(); err != nil {
		return nil, err
	}
	p.Jobs.Add(job.OneShot("fqdn-expire", func(ctx context.Context, _ cell.Health) error { return m.expireLoop(ctx) }))
	sock := proxy.LearnSocket(p.Proxy.Dir(p.Paths))
	p.Jobs.Add(job.OneShot("fqdn-proxy-socket", func(ctx context.Context, _ cell.Health) error { return m.serve(ctx, sock) }))
	return m, nil
}

// serve answers the proxy's POST /v1/learn (a fqdn.Lookup) on the unix
// socket at path: 204 once the datapath allows the addresses, 504 when
// the proxy's wait ended first.
func (m *NameManager) serve(ctx context.Context, path string) error {
	ln, err := unixsock.Listen(path)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/learn", func(w http.ResponseWriter, r *http.Request) {
		var l fqdn.Lookup
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&l); err != nil {
			http.Error(w, "lookup: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := m.Learn(r.Context(), l); err != nil {
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return unixsock.ServeHTTP(ctx, ln, mux)
}
