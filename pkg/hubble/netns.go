package hubble

import (
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
)

// netnsEndpoints names the local endpoint of a network namespace cookie:
// a socket trace names its caller by its namespace. Namespaces are
// measured (nodedatapath.NetNSCookie) when a cookie is not known, those of
// endpoints not measured yet, at most once a rescan interval.
type netnsEndpoints struct {
	db        *statedb.DB
	endpoints statedb.Table[*endpoint.EndpointRow]
	cookieOf  func(path string) (uint64, error)
	rescan    time.Duration

	mu       sync.Mutex
	byCookie map[uint64]netnsEndpoint
	measured map[string]uint64 // by namespace path
	scanned  time.Time
}

type netnsEndpoint struct {
	id   uint16
	path string
}

func newNetNSEndpoints(db *statedb.DB, endpoints statedb.Table[*endpoint.EndpointRow], cookieOf func(string) (uint64, error)) *netnsEndpoints {
	return &netnsEndpoints{db: db, endpoints: endpoints, cookieOf: cookieOf, rescan: time.Second,
		byCookie: map[uint64]netnsEndpoint{}, measured: map[string]uint64{}}
}

// lookup is the endpoint whose namespace has cookie, and its address.
func (n *netnsEndpoints) lookup(cookie uint64) (uint16, netip.Addr, bool) {
	if cookie == 0 {
		return 0, netip.Addr{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	txn := n.db.ReadTxn()
	if d, ok := n.find(txn, cookie); ok {
		return d.ID, d.IPv4, true
	}
	if time.Since(n.scanned) < n.rescan {
		return 0, netip.Addr{}, false
	}
	n.scanned = time.Now()
	// Measure the namespaces of endpoints that have none measured, and
	// forget those of endpoints gone.
	byCookie, measured := map[uint64]netnsEndpoint{}, map[string]uint64{}
	for d := range n.endpoints.All(txn) {
		c, ok := n.measured[d.NetNSPath]
		if !ok {
			var err error
			if c, err = n.cookieOf(d.NetNSPath); err != nil {
				continue // gone meanwhile, or not there yet: a later scan
			}
		}
		measured[d.NetNSPath] = c
		byCookie[c] = netnsEndpoint{id: d.ID, path: d.NetNSPath}
	}
	n.byCookie, n.measured = byCookie, measured
	if d, ok := n.find(txn, cookie); ok {
		return d.ID, d.IPv4, true
	}
	return 0, netip.Addr{}, false
}

// find is the endpoint cookie was measured for, if it is still the one
// with that id and namespace.
func (n *netnsEndpoints) find(txn statedb.ReadTxn, cookie uint64) (*endpoint.EndpointRow, bool) {
	e, ok := n.byCookie[cookie]
	if !ok {
		return nil, false
	}
	d, _, ok := n.endpoints.Get(txn, endpoint.IDIndex.Query(e.id))
	if !ok || d.NetNSPath != e.path {
		return nil, false
	}
	return d, true
}
