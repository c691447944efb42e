package proxy

import (
	"net/netip"
	"path/filepath"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/pkg/identity"
)

// IPCache names peers' identities from the node's datapath: its pinned
// ipcache under bpfRoot, the map the datapath judged the connection by.
type IPCache struct{ r *datapath.IPCacheReader }

// OpenIPCache opens the node's ipcache under bpfRoot (the agent's
// --bpf-root).
func OpenIPCache(bpfRoot string) (*IPCache, error) {
	r, err := datapath.OpenIPCache(filepath.Join(bpfRoot, "maps"))
	if err != nil {
		return nil, err
	}
	return &IPCache{r: r}, nil
}

// IdentityOf is Config.IdentityOf.
func (c *IPCache) IdentityOf(a netip.Addr) identity.NumericIdentity { return c.r.IdentityOf(a) }

// Close releases the map.
func (c *IPCache) Close() error { return c.r.Close() }
