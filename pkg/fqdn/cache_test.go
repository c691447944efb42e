package fqdn

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func never(uint16, netip.Addr) bool { return false }

// An address lives for its TTL, raised to the minimum; the names of an
// address are every endpoint's.
func TestCacheTTLs(t *testing.T) {
	c := NewCache(CacheConfig{MinTTL: 10 * time.Second})
	if !c.Learn(Lookup{Endpoint: 1, Name: "A.example.", IPs: addrs("192.0.2.1"), TTL: 2, Time: t0}) {
		t.Fatal("a new address is no change")
	}
	c.Learn(Lookup{Endpoint: 2, Name: "b.example", IPs: addrs("192.0.2.1", "192.0.2.2"), TTL: 60, Time: t0})
	if c.Learn(Lookup{Endpoint: 2, Name: "b.example", IPs: addrs("192.0.2.2"), TTL: 60, Time: t0.Add(time.Second)}) {
		t.Fatal("a refreshed address is a change")
	}
	want := map[netip.Addr][]string{addrs("192.0.2.1")[0]: {"a.example.", "b.example."}, addrs("192.0.2.2")[0]: {"b.example."}}
	if got := c.Names(); len(got) != 2 || !slices.Equal(got[addrs("192.0.2.1")[0]], want[addrs("192.0.2.1")[0]]) {
		t.Fatalf("names %v, want %v", got, want)
	}
	if c.Expire(t0.Add(9*time.Second), never) {
		t.Fatal("expired before the minimum TTL")
	}
	if !c.Expire(t0.Add(10*time.Second), never) {
		t.Fatal("nothing expired at the minimum TTL")
	}
	if got := c.Names()[addrs("192.0.2.1")[0]]; !slices.Equal(got, []string{"b.example."}) {
		t.Fatalf("names of 192.0.2.1 %v after a.example expired", got)
	}
	if next := c.NextExpiry(); !next.Equal(t0.Add(60 * time.Second)) {
		t.Fatalf("next expiry %v", next)
	}
}

// An endpoint keeps at most MaxIPsPerName addresses of a name: the soonest
// to expire go.
func TestCacheMaxIPsPerName(t *testing.T) {
	c := NewCache(CacheConfig{MaxIPsPerName: 2})
	c.Learn(Lookup{Endpoint: 1, Name: "a.example.", IPs: addrs("192.0.2.1"), TTL: 10, Time: t0})
	c.Learn(Lookup{Endpoint: 1, Name: "a.example.", IPs: addrs("192.0.2.2", "192.0.2.3"), TTL: 20, Time: t0})
	c.Learn(Lookup{Endpoint: 2, Name: "a.example.", IPs: addrs("192.0.2.1"), TTL: 10, Time: t0})
	var got []string
	for _, e := range c.Entries() {
		got = append(got, e.IP.String())
	}
	if want := []string{"192.0.2.2", "192.0.2.3", "192.0.2.1"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	// The count goes with what goes: after the name's addresses expired
	// and were restored, a new one is one too many again.
	c.Expire(t0.Add(time.Minute), func(uint16, netip.Addr) bool { return false })
	c.Restore([]CacheEntry{{Endpoint: 1, Name: "a.example.", IP: addrs("192.0.2.4")[0], Expires: t0.Add(time.Hour)},
		{Endpoint: 1, Name: "a.example.", IP: addrs("192.0.2.5")[0], Expires: t0.Add(2 * time.Hour)}})
	c.Restore([]CacheEntry{{Endpoint: 1, Name: "a.example.", IP: addrs("192.0.2.5")[0], Expires: t0.Add(2 * time.Hour)}})
	c.Learn(Lookup{Endpoint: 1, Name: "a.example.", IPs: addrs("192.0.2.6"), TTL: 30, Time: t0})
	got = nil
	for _, e := range c.Entries() {
		got = append(got, e.IP.String())
	}
	if want := []string{"192.0.2.5", "192.0.2.4"}; !slices.Equal(got, want) && !slices.Equal(got, []string{"192.0.2.4", "192.0.2.5"}) {
		t.Fatalf("entries %v, want %v: the soonest to expire goes", got, want)
	}
}

// An expired address that a connection of the endpoint still uses stays
// (a zombie) until the grace after its last use, and at most MaxZombies
// of them, the least recently used going first.
func TestCacheKeepsAddressesInUse(t *testing.T) {
	c := NewCache(CacheConfig{IdleGrace: 5 * time.Second, MaxZombies: 1})
	c.Learn(Lookup{Endpoint: 1, Name: "a.example.", IPs: addrs("192.0.2.1", "192.0.2.2", "192.0.2.3"), TTL: 1, Time: t0})
	open := map[netip.Addr]bool{addrs("192.0.2.1")[0]: true, addrs("192.0.2.2")[0]: true}
	inUse := func(ep uint16, ip netip.Addr) bool { return ep == 1 && open[ip] }
	c.Expire(t0.Add(2*time.Second), inUse)
	// Both in use, but only one zombie may stay.
	if got := c.Entries(); len(got) != 1 || !got[0].Zombie {
		t.Fatalf("entries %+v, want one zombie", got)
	}
	kept := c.Entries()[0].IP
	delete(open, kept)
	if c.Expire(t0.Add(6*time.Second), inUse) {
		t.Fatal("a zombie went within its grace")
	}
	if !c.Expire(t0.Add(8*time.Second), inUse) || len(c.Entries()) != 0 {
		t.Fatalf("entries %+v after the grace", c.Entries())
	}
}

// What Entries lists, Restore puts back.
func TestCacheRestore(t *testing.T) {
	c := NewCache(CacheConfig{})
	c.Learn(Lookup{Endpoint: 1, Name: "a.example.", IPs: addrs("192.0.2.1"), TTL: 30, Time: t0})
	r := NewCache(CacheConfig{})
	r.Restore(c.Entries())
	if !slices.Equal(r.Entries(), c.Entries()) {
		t.Fatalf("restored %+v, want %+v", r.Entries(), c.Entries())
	}
	if r.ForgetEndpoints(func(ep uint16) bool { return ep == 2 }) || !r.ForgetEndpoints(func(ep uint16) bool { return ep == 1 }) || len(r.Entries()) != 0 {
		t.Fatal("forget endpoint")
	}
}

// Learned is per endpoint: an address has the names its endpoint learned,
// not another's, and none once they are kept only for a connection.
func TestCacheLearnedPerEndpoint(t *testing.T) {
	c := NewCache(CacheConfig{IdleGrace: time.Minute})
	ip, other := addrs("192.0.2.1")[0], addrs("192.0.2.2")[0]
	c.Learn(Lookup{Endpoint: 1, Name: "B.example", IPs: []netip.Addr{ip}, TTL: 60, Time: t0})
	c.Learn(Lookup{Endpoint: 1, Name: "a.example.", IPs: []netip.Addr{ip, other}, TTL: 1, Time: t0})
	c.Learn(Lookup{Endpoint: 2, Name: "c.example.", IPs: []netip.Addr{ip}, TTL: 60, Time: t0})
	l := c.Learned()
	if got := l[1][ip]; !slices.Equal(got, []string{"a.example.", "b.example."}) {
		t.Errorf("endpoint 1's names of %s: %v", ip, got)
	}
	if got := l[2][ip]; !slices.Equal(got, []string{"c.example."}) {
		t.Errorf("endpoint 2's names of %s: %v", ip, got)
	}
	if got := l[2][other]; got != nil {
		t.Errorf("endpoint 2 learned nothing of %s: %v", other, got)
	}
	inUse := func(ep uint16, a netip.Addr) bool { return ep == 1 && a == other }
	c.Expire(t0.Add(2*time.Second), inUse)
	if got := c.Learned()[1]; !slices.Equal(got[ip], []string{"b.example."}) || got[other] != nil {
		t.Errorf("endpoint 1's names after a.example expired (a zombie of %s): %v", other, got)
	}
}
