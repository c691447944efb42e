package nodedatapath

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/ipcache"
)

// ipcacheLister answers GET /v1/ipcache from the map itself: what the
// datapath forwards by, not what the control plane wishes it held.
type ipcacheLister struct{ n *datapath.Node }

func asIPCacheLister(n *datapath.Node) server.IPCacheLister { return ipcacheLister{n: n} }

func (l ipcacheLister) ListIPCache() ([]models.IPCacheEntry, error) {
	maps := l.n.Maps()
	if maps == nil {
		return []models.IPCacheEntry{}, nil
	}
	entries, err := maps.IPCacheEntries()
	if err != nil {
		return nil, err
	}
	return IPCacheModels(entries), nil
}

// IPCacheModels converts ipcache entries for the API, sorted by address
// and then prefix length so that lists compare and read well.
func IPCacheModels(entries map[netip.Prefix]spec.IPCacheEntry) []models.IPCacheEntry {
	prefixes := make([]netip.Prefix, 0, len(entries))
	for p := range entries {
		prefixes = append(prefixes, p)
	}
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	out := make([]models.IPCacheEntry, 0, len(prefixes))
	for _, p := range prefixes {
		e := entries[p]
		m := models.IPCacheEntry{Prefix: p.String(), Identity: e.Identity}
		if e.TunnelEndpoint.IsValid() {
			m.TunnelEndpoint = e.TunnelEndpoint.String()
		}
		out = append(out, m)
	}
	return out
}

var _ ipcache.Map = (*datapath.Maps)(nil)
