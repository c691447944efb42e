package fqdn

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"
)

// Lookup is what an allowed DNS answer taught an endpoint: the addresses
// of a name, valid for a TTL.
type Lookup struct {
	Endpoint uint16       `json:"endpoint"`
	Name     string       `json:"name"` // fully qualified, lower case
	IPs      []netip.Addr `json:"ips"`
	TTL      uint32       `json:"ttl"` // seconds
	Time     time.Time    `json:"time"`
	// Targets are the names that Name's CNAME chain led to, in order: the
	// addresses are theirs too, each for its own TTL. An agent that does
	// not know the field learns Name alone, as before it.
	Targets []Target `json:"targets,omitempty"`
}

// Target is a name that a CNAME chain led to, with the smallest TTL of
// the records from it to the addresses: how long the answer vouches for
// its addresses. The names before it in the chain do not bound it.
type Target struct {
	Name string `json:"name"`
	TTL  uint32 `json:"ttl"`
}

// CacheConfig bounds a Cache, with Cilium's --tofqdns-* semantics.
type CacheConfig struct {
	// MinTTL is the shortest time an address is kept (tofqdns-min-ttl):
	// a shorter TTL is raised to it.
	MinTTL time.Duration
	// MaxIPsPerName bounds the addresses an endpoint keeps for one name
	// (tofqdns-endpoint-max-ip-per-hostname); the soonest to expire go
	// first. 0: no bound.
	MaxIPsPerName int
	// IdleGrace keeps an expired address for this long after the last
	// connection that used it (tofqdns-idle-connection-grace-period).
	IdleGrace time.Duration
	// MaxZombies bounds the expired addresses kept for their connections
	// (tofqdns-max-deferred-connection-deletes); the least recently used
	// go first. 0: no bound.
	MaxZombies int
}

// CacheEntry is one address an endpoint learned for a name.
type CacheEntry struct {
	Endpoint uint16     `json:"endpoint"`
	Name     string     `json:"name"`
	IP       netip.Addr `json:"ip"`
	TTL      uint32     `json:"ttl"`
	Lookup   time.Time  `json:"lookup"`
	Expires  time.Time  `json:"expires"`
	// Zombie: expired, and kept while a connection the name allowed
	// still uses the address; LastUsed is when one was last seen.
	Zombie   bool      `json:"zombie,omitempty"`
	LastUsed time.Time `json:"lastUsed,omitzero"`
}

type cacheKey struct {
	ep   uint16
	name string
	ip   netip.Addr
}

// Cache is the names and addresses that endpoints learned from allowed
// DNS answers: what toFQDNs selects. It is pure: the caller says what
// time it is and which connections are open.
type Cache struct {
	cfg     CacheConfig
	entries map[cacheKey]*CacheEntry
	// perName counts the entries of each endpoint and name, so that a
	// lookup looks for the oldest addresses of its name only when the
	// name has too many.
	perName map[nameKey]int
}

type nameKey struct {
	ep   uint16
	name string
}

// NewCache returns an empty cache.
func NewCache(cfg CacheConfig) *Cache {
	return &Cache{cfg: cfg, entries: map[cacheKey]*CacheEntry{}, perName: map[nameKey]int{}}
}

// put adds or replaces e.
func (c *Cache) put(e *CacheEntry) {
	k := cacheKey{e.Endpoint, e.Name, e.IP}
	if _, ok := c.entries[k]; !ok {
		c.perName[nameKey{k.ep, k.name}]++
	}
	c.entries[k] = e
}

// remove drops the entry of k.
func (c *Cache) remove(k cacheKey) {
	if _, ok := c.entries[k]; !ok {
		return
	}
	delete(c.entries, k)
	nk := nameKey{k.ep, k.name}
	if c.perName[nk]--; c.perName[nk] <= 0 {
		delete(c.perName, nk)
	}
}

// Learn records a lookup: its addresses for the name asked and for each
// CNAME target, each name with its own TTL. It says whether an address
// is new to the endpoint for one of the names (the names of an address
// changed).
func (c *Cache) Learn(l Lookup) (changed bool) {
	changed = c.learn(l, l.Name, l.TTL)
	for _, t := range l.Targets {
		changed = c.learn(l, t.Name, t.TTL) || changed
	}
	return changed
}

// learn records l's addresses for one name, valid for ttl seconds.
func (c *Cache) learn(l Lookup, name string, ttlSeconds uint32) (changed bool) {
	name = Normalize(name)
	ttl := max(time.Duration(ttlSeconds)*time.Second, c.cfg.MinTTL)
	for _, ip := range l.IPs {
		k := cacheKey{l.Endpoint, name, ip}
		e, ok := c.entries[k]
		if !ok {
			e = &CacheEntry{Endpoint: l.Endpoint, Name: name, IP: ip}
			c.put(e)
			changed = true
		}
		e.TTL, e.Lookup, e.Expires, e.Zombie = ttlSeconds, l.Time, l.Time.Add(ttl), false
	}
	if c.cfg.MaxIPsPerName > 0 && c.perName[nameKey{l.Endpoint, name}] > c.cfg.MaxIPsPerName {
		var same []*CacheEntry
		for _, e := range c.entries {
			if e.Endpoint == l.Endpoint && e.Name == name {
				same = append(same, e)
			}
		}
		if over := len(same) - c.cfg.MaxIPsPerName; over > 0 {
			slices.SortFunc(same, func(a, b *CacheEntry) int { return a.Expires.Compare(b.Expires) })
			for _, e := range same[:over] {
				c.remove(cacheKey{e.Endpoint, e.Name, e.IP})
			}
			changed = true
		}
	}
	return changed
}

// Expire drops what expired by now. An expired address that one of the
// endpoint's connections still uses (inUse) stays, a zombie, until
// IdleGrace after it was last seen in use: a connection allowed by name
// is never cut because the answer's TTL ran out. It says whether
// anything went.
func (c *Cache) Expire(now time.Time, inUse func(ep uint16, ip netip.Addr) bool) (changed bool) {
	var zombies []*CacheEntry
	for k, e := range c.entries {
		if now.Before(e.Expires) {
			continue
		}
		if inUse(e.Endpoint, e.IP) {
			e.Zombie, e.LastUsed = true, now
		}
		if e.Zombie && now.Sub(e.LastUsed) <= c.cfg.IdleGrace {
			zombies = append(zombies, e)
			continue
		}
		c.remove(k)
		changed = true
	}
	if c.cfg.MaxZombies > 0 && len(zombies) > c.cfg.MaxZombies {
		slices.SortFunc(zombies, func(a, b *CacheEntry) int { return a.LastUsed.Compare(b.LastUsed) })
		for _, e := range zombies[:len(zombies)-c.cfg.MaxZombies] {
			c.remove(cacheKey{e.Endpoint, e.Name, e.IP})
		}
		changed = true
	}
	return changed
}

// NextExpiry is when Expire has something to do next; zero for never.
func (c *Cache) NextExpiry() time.Time {
	var next time.Time
	for _, e := range c.entries {
		at := e.Expires
		if e.Zombie {
			at = e.LastUsed.Add(c.cfg.IdleGrace)
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// ForgetEndpoints drops what the endpoints that are gone learned.
func (c *Cache) ForgetEndpoints(gone func(ep uint16) bool) (changed bool) {
	for k := range c.entries {
		if gone(k.ep) {
			c.remove(k)
			changed = true
		}
	}
	return changed
}

// Names are the names of each address, over every endpoint: what
// toFQDNs selectors select addresses by.
func (c *Cache) Names() map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for _, e := range c.entries {
		if !slices.Contains(out[e.IP], e.Name) {
			out[e.IP] = append(out[e.IP], e.Name)
		}
	}
	for _, ns := range out {
		slices.Sort(ns)
	}
	return out
}

// Learned are, for each endpoint, the names it learned of each address,
// sorted: what Hubble knows a flow's other side by. Zombies are left out,
// as Cilium's Hubble leaves them: it reads an endpoint's DNS history, not
// the addresses kept past their TTL for open connections.
func (c *Cache) Learned() map[uint16]map[netip.Addr][]string {
	out := map[uint16]map[netip.Addr][]string{}
	for _, e := range c.entries {
		if e.Zombie {
			continue
		}
		byAddr := out[e.Endpoint]
		if byAddr == nil {
			byAddr = map[netip.Addr][]string{}
			out[e.Endpoint] = byAddr
		}
		byAddr[e.IP] = append(byAddr[e.IP], e.Name) // an entry per endpoint, name and address: no duplicates
	}
	for _, byAddr := range out {
		for _, ns := range byAddr {
			slices.Sort(ns)
		}
	}
	return out
}

// Entries lists the cache, by endpoint, name and address.
func (c *Cache) Entries() []CacheEntry {
	out := make([]CacheEntry, 0, len(c.entries))
	for _, k := range slices.SortedFunc(maps.Keys(c.entries), func(a, b cacheKey) int {
		return cmp.Or(cmp.Compare(a.ep, b.ep), cmp.Compare(a.name, b.name), a.ip.Compare(b.ip))
	}) {
		out = append(out, *c.entries[k])
	}
	return out
}

// Restore puts back entries that Entries listed (the cache of before a
// restart); those expired by now are dropped at the next Expire.
func (c *Cache) Restore(entries []CacheEntry) {
	for _, e := range entries {
		if !e.IP.IsValid() || e.Name == "" {
			continue
		}
		e.Name = Normalize(e.Name)
		c.put(&e)
	}
}
