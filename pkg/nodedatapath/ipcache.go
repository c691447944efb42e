package nodedatapath

import (
	"github.com/cilium-go/cilium/internal/datapath"
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
	return models.IPCacheEntries(entries), nil
}

var _ ipcache.Map = (*datapath.Maps)(nil)
