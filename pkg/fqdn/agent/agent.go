// Package agent keeps toFQDNs' names in the agent: the layer-7 proxy tells
// it each allowed DNS answer (Learn, over a unix socket), it keeps the
// name cache (pkg/fqdn) on disk so that a restarted agent knows what was
// learned before the first policy it computes, gives the policy engine
// the names of each address, and answers once the datapath allows the
// addresses, so that the endpoint's connections to them pass from their
// first packet.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/ipcache"
)

// Policy is the policy engine's side: it selects addresses by their names
// and says when an endpoint's policy is in its map.
type Policy interface {
	SetFQDNNames(map[netip.Addr][]string)
	AwaitEntries(ctx context.Context, ep uint16) error
}

// Conntrack lists the open connections by their addresses.
type Conntrack interface {
	OpenConnections(fn func(src, dst netip.Addr)) error
}

// NameManager owns the name cache.
type NameManager struct {
	log       *slog.Logger
	db        *statedb.DB
	ipcache   statedb.Table[*ipcache.EntryRow]
	endpoints statedb.Table[*endpoint.EndpointRow]
	policy    Policy
	conntrack Conntrack
	path      string // where the cache is kept across restarts

	mu    sync.Mutex
	cache *fqdn.Cache
	saved time.Time // when the file last had the cache
	wake  chan struct{}
	// learned is the cache's Learned as of its last change, for Hubble:
	// read once per flow, it must not wait for mu, held across disk writes.
	learned atomic.Pointer[map[uint16]map[netip.Addr][]string]
}

func newNameManager(log *slog.Logger, db *statedb.DB, ipc statedb.Table[*ipcache.EntryRow], eps statedb.Table[*endpoint.EndpointRow],
	pol Policy, ct Conntrack, cfg fqdn.CacheConfig, path string) *NameManager {
	return &NameManager{log: log, db: db, ipcache: ipc, endpoints: eps, policy: pol, conntrack: ct, path: path,
		cache: fqdn.NewCache(cfg), wake: make(chan struct{}, 1)}
}

// restore reads the cache of before a restart and gives the engine its
// names, before the engine computes its first policy.
func (m *NameManager) restore() error {
	b, err := os.ReadFile(m.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the FQDN cache: %w", err)
	}
	var entries []fqdn.CacheEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		// A cache that does not parse is lost, not fatal: names come
		// back with the next lookups.
		m.log.Warn("FQDN cache unreadable, starting empty", "path", m.path, "error", err)
		return nil
	}
	m.mu.Lock()
	m.cache.Restore(entries)
	names := m.cache.Names()
	m.publish()
	m.mu.Unlock()
	m.policy.SetFQDNNames(names)
	m.log.Info("FQDN cache restored", "entries", len(entries))
	return nil
}

// save writes the cache, replacing the file whole; the caller holds mu.
func (m *NameManager) save() error {
	b, err := json.Marshal(m.cache.Entries())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil {
		return err
	}
	tmp := m.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, m.path); err != nil {
		return err
	}
	m.saved = time.Now()
	return nil
}

// refreshSave is how stale the file may let the expiries of lookups that
// only put them off become: a restart restores them that much earlier.
const refreshSave = 5 * time.Second

// changed saves the cache and gives the engine the names; the caller
// holds mu.
func (m *NameManager) changed() {
	if err := m.save(); err != nil {
		m.log.Error("save the FQDN cache", "path", m.path, "error", err)
	}
	m.policy.SetFQDNNames(m.cache.Names())
	m.publish()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Learn records an allowed answer and returns once the datapath gives its
// addresses the identity that the endpoint's toFQDNs rules select, and
// the endpoint's policy map has their entries; or when ctx ends.
func (m *NameManager) Learn(ctx context.Context, l fqdn.Lookup) error {
	m.mu.Lock()
	changed := m.cache.Learn(l)
	if changed {
		m.changed()
	} else if time.Since(m.saved) >= refreshSave {
		if err := m.save(); err != nil {
			m.log.Error("save the FQDN cache", "path", m.path, "error", err)
		}
	}
	m.mu.Unlock()
	if !changed {
		return nil
	}
	for _, ip := range l.IPs {
		if err := m.awaitIPCache(ctx, ip); err != nil {
			return err
		}
	}
	return m.policy.AwaitEntries(ctx, l.Endpoint)
}

// awaitIPCache waits for the datapath's ipcache to hold an entry of ip's
// own address: the learned address's identity (or, for an address of the
// cluster, its pod's or node's, which toFQDNs does not select).
func (m *NameManager) awaitIPCache(ctx context.Context, ip netip.Addr) error {
	q := ipcache.PrefixIndex.Query(netip.PrefixFrom(ip, ip.BitLen()))
	for {
		row, _, watch, ok := m.ipcache.GetWatch(m.db.ReadTxn(), q)
		if ok && row.Status.Kind == reconciler.StatusKindDone {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ipcache entry of %s: %w", ip, context.Cause(ctx))
		case <-watch:
		}
	}
}

// publish makes the cache's names what NamesOf answers; the caller holds
// mu.
func (m *NameManager) publish() {
	learned := m.cache.Learned()
	m.learned.Store(&learned)
}

// NamesOf are the names, sorted, that endpoint ep learned of addr through
// the DNS proxy, as of the cache's last change: what Hubble knows the
// other side of ep's flows by. The slice is shared: read it only.
func (m *NameManager) NamesOf(ep uint16, addr netip.Addr) []string {
	learned := m.learned.Load()
	if learned == nil {
		return nil
	}
	return (*learned)[ep][addr]
}

// Entries lists the cache.
func (m *NameManager) Entries() []fqdn.CacheEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cache.Entries()
}

// expireLoop drops what expired, keeping addresses that open connections
// of their endpoint still use, until ctx ends.
func (m *NameManager) expireLoop(ctx context.Context) error {
	const longest = time.Minute
	// Until the endpoints are restored, no connection is seen as any
	// endpoint's: a restored address that expired during a restart
	// would go, under the connections still using it.
	if m.endpoints != nil {
		_, restored := m.endpoints.Initialized(m.db.ReadTxn())
		select {
		case <-restored:
		case <-ctx.Done():
			return nil
		}
	}
	for {
		m.mu.Lock()
		next := m.cache.NextExpiry()
		m.mu.Unlock()
		wait := longest
		if !next.IsZero() {
			wait = min(max(time.Until(next), time.Second), longest)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.wake:
			continue
		case <-time.After(wait):
		}
		live, inUse, err := m.inUse()
		if err != nil {
			m.log.Warn("FQDN cache: read conntrack; keeping expired addresses", "error", err)
			continue
		}
		m.mu.Lock()
		changed := m.cache.Expire(time.Now(), inUse)
		// A deleted endpoint's names go with it: an endpoint that gets
		// its id later learns its own.
		if live != nil && m.cache.ForgetEndpoints(func(ep uint16) bool { return !live[ep] }) {
			changed = true
		}
		if changed {
			m.changed()
		}
		m.mu.Unlock()
	}
}

// inUse names the live endpoints (nil without the endpoints table) and
// says, from conntrack, whether an endpoint has a connection open to an
// address.
func (m *NameManager) inUse() (live map[uint16]bool, inUse func(uint16, netip.Addr) bool, err error) {
	byAddr := map[netip.Addr]uint16{}
	if m.endpoints != nil {
		live = map[uint16]bool{}
		for ep := range endpoint.Live(m.db.ReadTxn(), m.endpoints) {
			byAddr[ep.IPv4] = ep.ID
			live[ep.ID] = true
		}
	}
	open := map[uint16]map[netip.Addr]bool{}
	if m.conntrack == nil {
		return live, func(uint16, netip.Addr) bool { return false }, nil
	}
	err = m.conntrack.OpenConnections(func(src, dst netip.Addr) {
		if id, ok := byAddr[src]; ok {
			if open[id] == nil {
				open[id] = map[netip.Addr]bool{}
			}
			open[id][dst] = true
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return live, func(ep uint16, ip netip.Addr) bool { return open[ep][ip] }, nil
}

// Lookups lists the cache as Cilium's GET /fqdn/cache does: one lookup per
// endpoint, name and answer, with its addresses; those kept past their
// TTL for open connections have the source "connection".
func (m *NameManager) Lookups() []models.DNSLookup {
	type key struct {
		ep              uint16
		name            string
		lookup, expires time.Time
		zombie          bool
	}
	var order []key
	byKey := map[key]*models.DNSLookup{}
	for _, e := range m.Entries() {
		k := key{e.Endpoint, e.Name, e.Lookup, e.Expires, e.Zombie}
		l := byKey[k]
		if l == nil {
			source := "lookup"
			if e.Zombie {
				source = "connection"
			}
			l = &models.DNSLookup{Fqdn: e.Name, TTL: int64(e.TTL), LookupTime: e.Lookup.UTC().Format(time.RFC3339Nano),
				ExpirationTime: e.Expires.UTC().Format(time.RFC3339Nano), EndpointID: int64(e.Endpoint), Source: source}
			byKey[k] = l
			order = append(order, k)
		}
		l.Ips = append(l.Ips, e.IP.String())
	}
	out := make([]models.DNSLookup, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}
