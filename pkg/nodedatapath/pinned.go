package nodedatapath

import (
	"log/slog"
	"path/filepath"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/tproxy"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/paths"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

// OpenPinnedMaps opens the maps that a running agent pinned in dir,
// creating none, for tools beside the agent (the benchmarks) that read
// what it programmed. Close releases them; the pins stay.
func OpenPinnedMaps(dir string) (*datapath.Maps, error) { return datapath.OpenPinnedMaps(dir) }

// ProxySockets opens sockets as the layer-7 proxy does (transparent; its
// upstream from the client's address, marked), for tools beside it (the
// benchmarks' relay).
type ProxySockets = tproxy.Sockets

// ProxyEgressMark is the mark of the proxy's upstream traffic for a local
// client of identity id.
func ProxyEgressMark(id identity.NumericIdentity) uint32 { return tproxy.EgressMark(id) }

// Cgroup2Root is where the cgroup v2 hierarchy is mounted, whose
// processes socket-level balancing (--bpf-lb-sock) serves.
func Cgroup2Root() (string, error) { return datapath.Cgroup2Root() }

// restoredCIDRs reads the CIDR identities that the node's pinned ipcache
// holds from the agent's last run, before this run's datapath takes the
// map over. Without a pinned ipcache (the node's first start) there are
// none.
func restoredCIDRs(p paths.Config, log *slog.Logger) policyagent.RestoredCIDRs {
	r, err := datapath.OpenIPCache(filepath.Join(p.BPFRoot, "maps"))
	if err != nil {
		log.Debug("no CIDR identities to restore", "error", err)
		return nil
	}
	defer r.Close()
	ids, err := r.LocalIdentities()
	if err != nil {
		log.Warn("CIDR identities not restored", "error", err)
		return nil
	}
	log.Info("CIDR identities restored", "prefixes", len(ids))
	return ids
}
