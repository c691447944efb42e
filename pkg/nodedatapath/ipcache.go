package nodedatapath

import (
	"net/netip"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	fqdnagent "github.com/cilium-go/cilium/pkg/fqdn/agent"
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

// conntrack lists the datapath's open connections for the FQDN cache.
type conntrack struct{ n *datapath.Node }

func asConntrack(n *datapath.Node) fqdnagent.Conntrack { return conntrack{n: n} }

// OpenConnections implements fqdnagent.Conntrack: no maps yet, no
// connections.
func (c conntrack) OpenConnections(fn func(src, dst netip.Addr)) error {
	maps := c.n.Maps()
	if maps == nil {
		return nil
	}
	conns, err := maps.Connections()
	if err != nil {
		return err
	}
	for _, conn := range conns {
		if !conn.Service {
			fn(conn.Src, conn.Dst)
		}
	}
	return nil
}
