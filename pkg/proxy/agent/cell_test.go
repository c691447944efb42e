package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/paths"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/policy/policytest"
	"github.com/cilium-go/cilium/pkg/proxy"
	proxyagent "github.com/cilium-go/cilium/pkg/proxy/agent"
)

// proxyMap is the policy map in memory, which notes the revision of the
// proxy's policy when each redirect to the proxy went in.
type proxyMap struct {
	*policytest.Map
	mu       sync.Mutex
	proxy    *proxy.Proxy // nil: no proxy runs
	redirect map[uint16]uint64
}

func (m *proxyMap) UpdatePolicy(ep uint16, groups map[spec.PolicyGroup][]spec.PolicyEntry) (bool, error) {
	m.mu.Lock()
	for _, entries := range groups {
		if slices.ContainsFunc(entries, func(e spec.PolicyEntry) bool { return e.ProxyPort != 0 }) {
			m.redirect[ep] = 0
			if m.proxy != nil {
				m.redirect[ep] = m.proxy.Revision()
			}
		}
	}
	m.mu.Unlock()
	return m.Map.UpdatePolicy(ep, groups)
}

func (m *proxyMap) setProxy(p *proxy.Proxy) {
	m.mu.Lock()
	m.proxy = p
	m.mu.Unlock()
}

// redirectedAt is the revision of the proxy's policy when endpoint ep's
// redirects went into its map.
func (m *proxyMap) redirectedAt(ep uint16) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.redirect[ep]
}

type proxyTest struct {
	dir      string
	m        *proxyMap
	db       *statedb.DB
	eps      statedb.RWTable[*endpoint.EndpointRow]
	policies statedb.RWTable[*policyagent.EndpointPolicyRow]
	entries  statedb.RWTable[*policyagent.PolicyEntryRow]
}

// startAgent runs the agent's policy map and proxy cells with the proxy's
// directory in dir.
func startAgent(t *testing.T, dir string) *proxyTest {
	pt := &proxyTest{dir: dir, m: &proxyMap{Map: policytest.New(), redirect: map[uint16]uint64{}}}
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, policyagent.Cell, proxyagent.Cell,
		cell.Config(paths.DefaultConfig),
		cell.Provide(
			endpoint.NewTable, statedb.RWTable[*endpoint.EndpointRow].ToTable,
			func() policyagent.MapSource { return func() policyagent.Map { return pt.m } },
		),
		cell.Invoke(func(db *statedb.DB, eps statedb.RWTable[*endpoint.EndpointRow], pols statedb.RWTable[*policyagent.EndpointPolicyRow],
			entries statedb.RWTable[*policyagent.PolicyEntryRow]) {
			pt.db, pt.eps, pt.policies, pt.entries = db, eps, pols, entries
		}))
	hive.AddConfigOverride(h, func(c *proxyagent.Config) { c.ProxyDir = dir })
	// Redirects wait for the proxy as long as the test takes: its
	// verdicts do not hang on how busy the machine is.
	hive.AddConfigOverride(h, func(c *policyagent.MapConfig) { c.ProxyAckTimeout = time.Hour })
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })
	return pt
}

// startProxy runs the proxy's policy watcher against the agent's
// directory, as cmd/cilium-proxy does.
func (pt *proxyTest) startProxy(t *testing.T) {
	p := proxy.New(proxy.Config{Log: hivetest.Logger(t), AckPolicy: proxy.AckClient(proxy.AckSocket(pt.dir))})
	pt.m.setProxy(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		proxy.WatchPolicy(ctx, proxy.PolicyFile(pt.dir), p, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

var web = spec.PolicyEntry{Direction: spec.Egress, Identity: 2000, Protocol: spec.ProtoTCP, Port: 80, ProxyPort: proxy.DefaultHTTPPort}

// addEndpoints writes what the policy engine writes for new endpoints at
// revision rev: each one's policy, with layer-7 ports where its entries
// redirect, and its entries, in one transaction.
func (pt *proxyTest) addEndpoints(rev uint64, eps map[uint16][]spec.PolicyEntry) {
	txn := pt.db.WriteTxn(pt.eps, pt.policies, pt.entries)
	for id, entries := range eps {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(id)})
		_, _, _ = pt.eps.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: id, IPv4: ip, Identity: 1000}})
		row := &policyagent.EndpointPolicyRow{EndpointID: id, Identity: 1000, Revision: rev, EnforceEgress: true}
		for _, e := range entries {
			if e.ProxyPort != 0 {
				row.L7 = append(row.L7, policy.L7Port{Direction: e.Direction, Protocol: e.Protocol, Port: e.Port,
					Allows: []policy.L7Allow{{Identities: []identity.NumericIdentity{e.Identity}}}})
			}
			_, _, _ = pt.entries.Insert(txn, &policyagent.PolicyEntryRow{EndpointID: id, Entry: e, Revision: rev, Status: reconciler.StatusPending()})
		}
		_, _, _ = pt.policies.Insert(txn, row)
	}
	txn.Commit()
}

func (pt *proxyTest) holds(id uint16, want ...spec.PolicyEntry) func() error {
	return func() error {
		if got := pt.m.Policy(id); !slices.Equal(got, want) {
			return fmt.Errorf("endpoint %d: map holds %v, want %v", id, got, want)
		}
		return nil
	}
}

// A new endpoint's redirect to the proxy goes into its map once the
// proxy judges by a policy that knows it, not before: the proxy's older
// policy would deny the connections it gets. Other endpoints' entries
// do not wait.
func TestRedirectsWaitForTheProxysPolicy(t *testing.T) {
	pt := startAgent(t, t.TempDir())
	plain := spec.PolicyEntry{Direction: spec.Egress, Identity: 2000, Protocol: spec.ProtoTCP, Port: 443}
	pt.addEndpoints(5, map[uint16][]spec.PolicyEntry{3: {web}, 4: {plain}})
	testenv.Eventually(t, 10*time.Second, pt.holds(4, plain))
	if got := pt.m.Policy(3); len(got) != 0 {
		t.Fatalf("endpoint 3 redirects (%v) before the proxy acknowledged its policy", got)
	}

	// The proxy starts (as after the agent, from its DaemonSet): it
	// loads the policy, acknowledges it, and the redirect goes in.
	pt.startProxy(t)
	testenv.Eventually(t, 10*time.Second, pt.holds(3, web))
	if rev := pt.m.redirectedAt(3); rev < 5 {
		t.Fatalf("endpoint 3 redirected to a proxy of policy %d, want 5 or later", rev)
	}

	// With the proxy running, every new redirect waits for it.
	for id := uint16(10); id < 15; id++ {
		pt.addEndpoints(uint64(id), map[uint16][]spec.PolicyEntry{id: {web}})
		testenv.Eventually(t, 10*time.Second, pt.holds(id, web))
		if rev := pt.m.redirectedAt(id); rev < uint64(id) {
			t.Fatalf("endpoint %d redirected to a proxy of policy %d, want %d or later", id, rev, id)
		}
	}
}

// A proxy that outlived an agent acknowledges the policy of the agent's
// earlier run, whose revisions are not the new run's: the new agent
// takes no such acknowledgement for one of its own.
func TestAcksOfAnEarlierAgentAreNotTaken(t *testing.T) {
	pt := startAgent(t, t.TempDir())
	var run uint64
	testenv.Eventually(t, 10*time.Second, func() error {
		b, err := os.ReadFile(proxy.PolicyFile(pt.dir))
		if err != nil {
			return err
		}
		var pol proxy.Policy
		if err := json.Unmarshal(b, &pol); err != nil {
			return err
		}
		if run = pol.Run; run == 0 {
			return fmt.Errorf("policy %s names no run", b)
		}
		return nil
	})
	ack := proxy.AckClient(proxy.AckSocket(pt.dir))
	send := func(a proxy.Ack) {
		t.Helper()
		// The socket may come up after the file.
		testenv.Eventually(t, 10*time.Second, func() error { return ack(context.Background(), a) })
	}
	send(proxy.Ack{Run: run + 1, Revision: 50})

	plain := spec.PolicyEntry{Direction: spec.Egress, Identity: 2000, Protocol: spec.ProtoTCP, Port: 443}
	pt.addEndpoints(5, map[uint16][]spec.PolicyEntry{3: {web}, 4: {plain}})
	testenv.Eventually(t, 10*time.Second, pt.holds(4, plain))
	if got := pt.m.Policy(3); len(got) != 0 {
		t.Fatalf("endpoint 3 redirects (%v) on an earlier agent's acknowledgement", got)
	}
	send(proxy.Ack{Run: run, Revision: 5})
	testenv.Eventually(t, 10*time.Second, pt.holds(3, web))
}

// The proxy's policy holds the live endpoints with layer-7 ports; its
// revision is the latest of every policy with such ports, the endpoint
// in the file or not, so that acknowledging it tells of them all.
func TestProxyPolicy(t *testing.T) {
	db := statedb.New()
	eps, err := endpoint.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	pols, err := policyagent.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	l7 := []policy.L7Port{{Direction: spec.Egress, Protocol: spec.ProtoTCP, Port: 80, Allows: []policy.L7Allow{{Wildcard: true}}}}
	txn := db.WriteTxn(eps, pols)
	for _, ep := range []endpoint.Endpoint{
		{ID: 3, IPv4: netip.MustParseAddr("10.0.0.3")},
		{ID: 5, IPv4: netip.MustParseAddr("10.0.0.5")},
		{ID: 6}, // no IPv4: the proxy cannot tell its connections
	} {
		_, _, _ = eps.Insert(txn, &endpoint.EndpointRow{Endpoint: ep})
	}
	for _, row := range []*policyagent.EndpointPolicyRow{
		{EndpointID: 3, Identity: 1000, Revision: 5, L7: l7},
		{EndpointID: 4, Identity: 1001, Revision: 6, L7: l7}, // its endpoint row gone already
		{EndpointID: 5, Identity: 1002, Revision: 9},         // no layer-7 ports
		{EndpointID: 6, Identity: 1003, Revision: 7, L7: l7},
	} {
		_, _, _ = pols.Insert(txn, row)
	}
	rtxn := txn.Commit()
	got := proxyagent.ProxyPolicy(rtxn, pols, eps)
	want := proxy.Policy{Revision: 7, Endpoints: []proxy.Endpoint{{ID: 3, Identity: 1000, IPv4: netip.MustParseAddr("10.0.0.3"), Ports: l7}}}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("policy %s, want %s", gotJSON, wantJSON)
	}
}
