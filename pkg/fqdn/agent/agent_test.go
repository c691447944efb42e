package agent

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
)

// noPolicy takes the names and has every entry already.
type noPolicy struct{}

func (noPolicy) SetFQDNNames(map[netip.Addr][]string)       {}
func (noPolicy) AwaitEntries(context.Context, uint16) error { return nil }

// NamesOf answers what the cache held at its last change, per endpoint,
// from the first restore on: Hubble names flows after an agent restart
// as before it.
func TestNamesOfFollowsTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fqdn-cache.json")
	ip := netip.MustParseAddr("192.0.2.10")
	m := newNameManager(hivetest.Logger(t), nil, nil, nil, noPolicy{}, nil, fqdn.CacheConfig{}, path)
	if got := m.NamesOf(7, ip); got != nil {
		t.Fatalf("names before any lookup: %v", got)
	}
	m.mu.Lock()
	m.cache.Learn(fqdn.Lookup{Endpoint: 7, Name: "world.example", IPs: []netip.Addr{ip}, TTL: 300, Time: time.Now()})
	m.changed()
	m.mu.Unlock()
	if got := m.NamesOf(7, ip); !slices.Equal(got, []string{"world.example."}) {
		t.Errorf("endpoint 7's names of %s: %v", ip, got)
	}
	if got := m.NamesOf(8, ip); got != nil {
		t.Errorf("endpoint 8 learned nothing: %v", got)
	}

	restarted := newNameManager(hivetest.Logger(t), nil, nil, nil, noPolicy{}, nil, fqdn.CacheConfig{}, path)
	if err := restarted.restore(); err != nil {
		t.Fatal(err)
	}
	if got := restarted.NamesOf(7, ip); !slices.Equal(got, []string{"world.example."}) {
		t.Errorf("after a restart, endpoint 7's names of %s: %v", ip, got)
	}
}

// engine is the policy engine itself, its entries always in the map.
type engine struct{ *policy.Engine }

func (engine) AwaitEntries(context.Context, uint16) error { return nil }

// An answer that went through a CNAME chain teaches its addresses to the
// names of the chain: a toFQDNs rule for the chain's last name selects
// them, each name keeps its own TTL, and cilium-dbg fqdn cache list
// shows every name.
func TestCNAMETargetsAreSelectable(t *testing.T) {
	web := &policy.Identity{ID: 1000, Labels: labels.Labels{}}
	web.Labels.Add(labels.New(labels.SourceK8s, "app", "web"))
	o := policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "fqdn"}
	e := policy.NewEngine(policy.ModeDefault)
	e.UpsertIdentity(web)
	e.SetRules(o, []policy.Rule{{Origin: o, Subject: policy.IdentitySet{Name: "web", IDs: []identity.NumericIdentity{web.ID}},
		Direction: spec.Egress, DefaultDeny: true, Peers: []policy.Selector{policy.NewFQDNSelector(policy.DNSRule{MatchName: "c.example"})},
		Ports: []policy.Port{{Protocol: spec.ProtoTCP, Port: 443}}}})
	e.UpsertEndpoint(policy.EndpointInfo{ID: 7, Identity: web.ID})
	allowed := func() []netip.Addr {
		t.Helper()
		e.Flush()
		byID := map[identity.NumericIdentity]netip.Addr{}
		for _, p := range e.Prefixes() {
			byID[p.Identity] = p.Prefix.Addr()
		}
		var out []netip.Addr
		for ent := range e.Entries(7) {
			if ent.Direction == spec.Egress && ent.Port == 443 {
				out = append(out, byID[ent.Identity])
			}
		}
		slices.SortFunc(out, netip.Addr.Compare)
		return out
	}

	m := newNameManager(hivetest.Logger(t), nil, nil, nil, engine{e}, nil, fqdn.CacheConfig{}, filepath.Join(t.TempDir(), "fqdn-cache.json"))
	now := time.Now()
	ips := []netip.Addr{netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.4")}
	m.mu.Lock()
	m.cache.Learn(fqdn.Lookup{Endpoint: 7, Name: "a.example.", IPs: ips[:1], TTL: 300, Time: now})
	m.changed()
	m.mu.Unlock()
	if got := allowed(); len(got) != 0 {
		t.Fatalf("allowed %v by a.example's answer alone, want nothing", got)
	}
	m.mu.Lock()
	m.cache.Learn(fqdn.Lookup{Endpoint: 7, Name: "a.example.", IPs: ips, TTL: 40, Time: now,
		Targets: []fqdn.Target{{Name: "b.example.", TTL: 40}, {Name: "c.example.", TTL: 90}}})
	m.changed()
	m.mu.Unlock()
	if got := allowed(); !slices.Equal(got, ips) {
		t.Fatalf("allowed %v, want c.example's addresses %v", got, ips)
	}
	ttls := map[string]int64{}
	for _, l := range m.Lookups() {
		if !slices.Equal(l.Ips, []string{"192.0.2.3", "192.0.2.4"}) && l.Fqdn != "a.example." {
			t.Errorf("lookup %+v: addresses %v", l, l.Ips)
		}
		ttls[l.Fqdn] = l.TTL
	}
	if want := map[string]int64{"a.example.": 40, "b.example.": 40, "c.example.": 90}; !maps.Equal(ttls, want) {
		t.Errorf("fqdn cache list: names and TTLs %v, want %v", ttls, want)
	}
	// The chain's first names expire first; the target stays selected
	// for its own TTL.
	m.mu.Lock()
	m.cache.Expire(now.Add(time.Minute), func(uint16, netip.Addr) bool { return false })
	m.changed()
	m.mu.Unlock()
	if got := allowed(); !slices.Equal(got, ips) {
		t.Fatalf("allowed %v a minute on, want c.example's addresses %v", got, ips)
	}
	if got := m.NamesOf(7, ips[0]); !slices.Equal(got, []string{"c.example."}) {
		t.Errorf("names of %s a minute on: %v, want c.example. alone", ips[0], got)
	}
}

// openConns is conntrack holding the connections from src to dst.
type openConns map[netip.Addr][]netip.Addr

func (o openConns) OpenConnections(fn func(src, dst netip.Addr)) error {
	for src, dsts := range o {
		for _, dst := range dsts {
			fn(src, dst)
		}
	}
	return nil
}

// A restart restores what the last lookups said: a lookup that only put
// an address's expiry off reaches the file within refreshSave, and an
// address that expired during the restart stays for the connections
// still using it, which the agent sees only once its endpoints are
// restored.
func TestRestartKeepsExpiriesAndTheConnectionsAddresses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fqdn-cache.json")
	inUse, idle := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	epIP := netip.MustParseAddr("10.0.0.7")
	m := newNameManager(hivetest.Logger(t), nil, nil, nil, noPolicy{}, nil, fqdn.CacheConfig{}, path)
	first := time.Now().Add(-time.Hour)
	l := fqdn.Lookup{Endpoint: 7, Name: "world.example.", IPs: []netip.Addr{inUse, idle}, TTL: 30, Time: first}
	m.mu.Lock()
	m.cache.Learn(l)
	m.changed()
	m.mu.Unlock()
	expiries := func(m *NameManager) map[netip.Addr]time.Time {
		out := map[netip.Addr]time.Time{}
		for _, e := range m.Entries() {
			out[e.IP] = e.Expires
		}
		return out
	}
	restore := func() *NameManager {
		t.Helper()
		r := newNameManager(hivetest.Logger(t), nil, nil, nil, noPolicy{}, nil, fqdn.CacheConfig{}, path)
		if err := r.restore(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Within refreshSave the refresh stays in memory; past it, the file
	// has it.
	l.Time = first.Add(time.Second)
	must(t, m.Learn(context.Background(), l))
	if got := expiries(restore())[inUse]; !got.Equal(first.Add(30 * time.Second)) {
		t.Fatalf("restored expiry %v right after the first save, want the first lookup's %v", got, first.Add(30*time.Second))
	}
	m.mu.Lock()
	m.saved = m.saved.Add(-refreshSave)
	m.mu.Unlock()
	l.Time = first.Add(2 * time.Second)
	must(t, m.Learn(context.Background(), l))
	if got := expiries(restore())[inUse]; !got.Equal(first.Add(32 * time.Second)) {
		t.Fatalf("restored expiry %v, want the refreshing lookup's %v", got, first.Add(32*time.Second))
	}

	// Both addresses expired an hour ago; the endpoint's connection to
	// one of them is seen once the endpoints are restored.
	db := statedb.New()
	eps, err := endpoint.NewTable(db)
	must(t, err)
	txn := db.WriteTxn(eps)
	restored := eps.RegisterInitializer(txn, "endpoint-restore")
	txn.Commit()
	r := newNameManager(hivetest.Logger(t), db, nil, eps, noPolicy{}, openConns{epIP: {inUse}}, fqdn.CacheConfig{}, path)
	must(t, r.restore())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.expireLoop(ctx) }()
	defer func() { cancel(); must(t, <-done) }()
	time.Sleep(1500 * time.Millisecond) // the loop's first expiry is due after a second
	if got := expiries(r); len(got) != 2 {
		t.Fatalf("before the endpoints were restored, the cache lost addresses: %v", got)
	}
	txn = db.WriteTxn(eps)
	_, _, err = eps.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: 7, IPv4: epIP}})
	must(t, err)
	restored(txn)
	txn.Commit()
	r.wake <- struct{}{}
	testenv.Eventually(t, 5*time.Second, func() error {
		if got := expiries(r); len(got) != 1 || got[inUse].IsZero() {
			return fmt.Errorf("cache %v, want %s alone, which a connection uses", got, inUse)
		}
		return nil
	})

	// What an endpoint that is gone learned goes with it.
	r.mu.Lock()
	r.cache.Learn(fqdn.Lookup{Endpoint: 9, Name: "gone.example.", IPs: []netip.Addr{idle}, TTL: 3600, Time: time.Now()})
	r.changed()
	r.mu.Unlock()
	testenv.Eventually(t, 5*time.Second, func() error {
		for _, e := range r.Entries() {
			if e.Endpoint != 7 {
				return fmt.Errorf("endpoint %d, which is gone, still has %s for %s", e.Endpoint, e.IP, e.Name)
			}
		}
		return nil
	})
	if got := expiries(r); got[inUse].IsZero() {
		t.Errorf("endpoint 7's %s went with endpoint 9's names", inUse)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
