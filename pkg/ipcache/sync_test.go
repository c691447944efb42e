package ipcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/node"
)

// syncHarness is a clusterSync of node "a" over input tables of its own,
// whose rounds the test runs.
type syncHarness struct {
	t        *testing.T
	db       *statedb.DB
	k8s      *tables.RW
	eps      statedb.RWTable[*endpoint.EndpointRow]
	prefixes statedb.RWTable[*PolicyPrefixRow]
	ipcache  statedb.RWTable[*EntryRow]
	routes   statedb.RWTable[*node.RouteRow]
	s        *clusterSync
}

func newSyncHarness(t *testing.T) *syncHarness {
	t.Helper()
	h := &syncHarness{t: t, db: statedb.New()}
	var errs [5]error
	h.k8s, errs[0] = tables.NewRW(h.db)
	h.eps, errs[1] = endpoint.NewTable(h.db)
	h.prefixes, errs[2] = NewPrefixesTable(h.db)
	h.ipcache, errs[3] = NewTable(h.db)
	h.routes, errs[4] = node.NewTable(h.db)
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	if err := h.db.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.db.Stop() })
	var err error
	h.s, err = newClusterSync(params{Reconciler: reconciler.Params{DB: h.db}, Table: h.ipcache, RemoteNodes: h.routes,
		Endpoints: h.eps, K8sNodes: h.k8s.Nodes, CiliumNodes: h.k8s.CiliumNodes, CiliumEndpoints: h.k8s.CiliumEndpoints,
		K8s: &tables.Clients{NodeName: "a"}, Prefixes: h.prefixes})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// put inserts objs into tbl, in one transaction.
func put[T any](h *syncHarness, tbl statedb.RWTable[T], objs ...T) {
	h.t.Helper()
	txn := h.db.WriteTxn(tbl)
	for _, o := range objs {
		if _, _, err := tbl.Insert(txn, o); err != nil {
			h.t.Fatal(err)
		}
	}
	txn.Commit()
}

// del deletes objs from tbl, in one transaction.
func del[T any](h *syncHarness, tbl statedb.RWTable[T], objs ...T) {
	h.t.Helper()
	txn := h.db.WriteTxn(tbl)
	for _, o := range objs {
		if _, _, err := tbl.Delete(txn, o); err != nil {
			h.t.Fatal(err)
		}
	}
	txn.Commit()
}

// round runs a round over the inputs as of now.
func (h *syncHarness) round() roundStats {
	h.t.Helper()
	st, err := h.s.round(h.db.ReadTxn())
	if err != nil {
		h.t.Fatalf("round: %v", err)
	}
	return st
}

// cluster is the whole of the inputs, as DesiredIPCache reads them.
func (h *syncHarness) cluster() Cluster {
	txn := h.db.ReadTxn()
	c := Cluster{Local: endpoint.Local(txn, h.eps),
		Nodes: node.Merge("a", statedb.Collect(h.k8s.Nodes.All(txn)), statedb.Collect(h.k8s.CiliumNodes.All(txn)))}
	for cep := range h.k8s.CiliumEndpoints.All(txn) {
		if ep, ok := RemoteEndpointOf(cep); ok {
			c.Remote = append(c.Remote, ep)
		}
	}
	for p := range h.prefixes.All(txn) {
		c.Prefixes = append(c.Prefixes, *p)
	}
	return c
}

// check compares the tables with DesiredIPCache and RemoteNodes of the
// whole of the inputs.
func (h *syncHarness) check(what string) {
	h.t.Helper()
	c := h.cluster()
	if got, want := tableContents(h.db, h.ipcache), DesiredIPCache(c); !reflect.DeepEqual(got, want) {
		h.t.Fatalf("%s: ipcache\n got %v\nwant %v", what, got, want)
	}
	want := map[netip.Prefix]netip.Addr{}
	for _, r := range RemoteNodes(c.Nodes) {
		want[r.PodCIDR] = r.IPv4
	}
	if got := nodesContents(h.db, h.routes); !reflect.DeepEqual(got, want) {
		h.t.Fatalf("%s: remote nodes\n got %v\nwant %v", what, got, want)
	}
}

func tableContents(db *statedb.DB, tbl statedb.Table[*EntryRow]) map[netip.Prefix]spec.IPCacheEntry {
	out := map[netip.Prefix]spec.IPCacheEntry{}
	for e := range tbl.All(db.ReadTxn()) {
		out[e.Prefix] = e.Value()
	}
	return out
}

func nodesContents(db *statedb.DB, tbl statedb.Table[*node.RouteRow]) map[netip.Prefix]netip.Addr {
	out := map[netip.Prefix]netip.Addr{}
	for r := range tbl.All(db.ReadTxn()) {
		out[r.PodCIDR] = r.IPv4
	}
	return out
}

func localEP(id uint16, ip string, num identity.NumericIdentity) *endpoint.EndpointRow {
	return &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: id, IPv4: addr(ip), Identity: num}}
}

// The first round writes both tables, initialized; later rounds follow
// nodes that move, leave and join, and the routes with them.
func TestClusterSync(t *testing.T) {
	h := newSyncHarness(t)
	put(h, h.k8s.Nodes, k8stest.Node("a", "192.168.0.2", "10.0.1.0/24"), k8stest.Node("b", "192.168.0.3", "10.0.2.0/24"))
	put(h, h.eps, localEP(1, "10.0.1.5", 300))
	h.round()
	txn := h.db.ReadTxn()
	if ok, _ := h.ipcache.Initialized(txn); !ok {
		t.Error("the ipcache is not initialized after the first round")
	}
	if ok, _ := h.routes.Initialized(txn); !ok {
		t.Error("the remote nodes are not initialized after the first round")
	}
	steps := []struct {
		name       string
		change     func()
		wantIPC    map[netip.Prefix]spec.IPCacheEntry
		wantRoutes map[netip.Prefix]netip.Addr
	}{
		{
			name:   "two nodes",
			change: func() {},
			wantIPC: map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.3/32"): entry(6, ""),
				pfx("10.0.1.5/32"): entry(300, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.3")},
		},
		{
			name: "node b moves to another address, the local endpoint goes",
			change: func() {
				put(h, h.k8s.Nodes, k8stest.Node("b", "192.168.0.4", "10.0.2.0/24"))
				del(h, h.eps, localEP(1, "10.0.1.5", 300))
			},
			wantIPC:    map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.4/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.4")},
		},
		{
			name: "node b leaves, c joins",
			change: func() {
				del(h, h.k8s.Nodes, k8stest.Node("b", "192.168.0.4", "10.0.2.0/24"))
				put(h, h.k8s.CiliumNodes, k8stest.CiliumNode("c", "192.168.0.5", "10.0.3.0/24"))
			},
			wantIPC:    map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.5/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.3.0/24"): addr("192.168.0.5")},
		},
	}
	for _, st := range steps {
		st.change()
		h.round()
		if got := tableContents(h.db, h.ipcache); !reflect.DeepEqual(got, st.wantIPC) {
			t.Errorf("%s: ipcache\n got %v\nwant %v", st.name, got, st.wantIPC)
		}
		if got := nodesContents(h.db, h.routes); !reflect.DeepEqual(got, st.wantRoutes) {
			t.Errorf("%s: remote nodes\n got %v\nwant %v", st.name, got, st.wantRoutes)
		}
	}
}

// With 1000 endpoints of another node in the ipcache, a change of one
// CiliumEndpoint computes and writes the entries of its old and new
// address, not the whole cluster's.
func TestOneCiliumEndpointComputesOnlyItsAddresses(t *testing.T) {
	const n = 1000
	h := newSyncHarness(t)
	put(h, h.k8s.Nodes, k8stest.Node("a", "192.168.0.2", "10.0.0.0/16"), k8stest.Node("b", "192.168.0.3", "10.1.0.0/16"))
	cep := func(i int, ip string, id int64) *v2.CiliumEndpoint {
		return k8stest.CiliumEndpoint("shop", fmt.Sprint("web-", i), ip, "192.168.0.3", id)
	}
	ceps := make([]*v2.CiliumEndpoint, n)
	for i := range ceps {
		ceps[i] = cep(i, fmt.Sprintf("10.1.%d.%d", i/200, i%200+1), 300)
	}
	put(h, h.k8s.CiliumEndpoints, ceps...)
	if st := h.round(); st.computed != n+2 || st.changed != n+2 {
		t.Fatalf("first round computed %d and wrote %d entries, want all %d", st.computed, st.changed, n+2)
	}
	h.check("after the first round")

	// written counts the ipcache's rows written since the table's
	// revision rev.
	written := func(rev statedb.Revision) int {
		count := 0
		for range h.ipcache.LowerBound(h.db.ReadTxn(), statedb.ByRevision[*EntryRow](rev+1)) {
			count++
		}
		return count
	}
	steps := []struct {
		name              string
		cep               *v2.CiliumEndpoint
		computed, written int
		deleted           int
	}{
		{name: "a new identity", cep: cep(7, "10.1.0.8", 301), computed: 1, written: 1},
		{name: "a new address", cep: cep(8, "10.1.9.9", 300), computed: 2, written: 1, deleted: 1},
		{name: "nothing the ipcache reads", cep: func() *v2.CiliumEndpoint {
			c := cep(9, "10.1.0.10", 300)
			c.Labels = map[string]string{"app": "web"}
			return c
		}()},
	}
	for _, st := range steps {
		rev := h.ipcache.Revision(h.db.ReadTxn())
		put(h, h.k8s.CiliumEndpoints, st.cep)
		got := h.round()
		if got.computed != st.computed {
			t.Errorf("%s: computed %d entries, want %d (a whole recompute computes %d)", st.name, got.computed, st.computed, n+2)
		}
		if w := written(rev); w != st.written || got.deleted != st.deleted {
			t.Errorf("%s: wrote %d entries and deleted %d, want %d and %d", st.name, w, got.deleted, st.written, st.deleted)
		}
		h.check(st.name)
	}
}

// The incremental ipcache equals DesiredIPCache of the whole cluster
// after every round of random changes to every input: local endpoints,
// Nodes, CiliumNodes (with health endpoints), CiliumEndpoints and policy
// prefixes, drawn from small pools so that they collide on addresses,
// node addresses and pod CIDRs.
func TestIncrementalIPCacheIsDesiredIPCache(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 27))
			h := newSyncHarness(t)
			h.round()
			h.check("at start")
			for i := range 60 {
				for range 1 + rng.IntN(4) {
					randomChange(h, rng)
				}
				h.round()
				h.check(fmt.Sprint("round ", i))
			}
		})
	}
}

var (
	nodeNames  = []string{"a", "b", "c", "d"}
	nodeIPs    = []string{"192.168.0.1", "192.168.0.2", "192.168.0.3", "192.168.0.4", ""}
	podCIDRs   = []string{"10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24", "10.0.0.0/16", ""}
	podIPs     = []string{"10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2", "10.0.3.1", "10.0.9.1", "192.168.0.2", "192.168.0.3"}
	publishers = []string{"192.168.0.1", "192.168.0.2", "192.168.0.3", "192.168.0.4", "203.0.113.7"}
	prefixPool = []string{"10.0.0.0/8", "10.0.1.0/24", "10.0.2.1/32", "192.168.0.2/32", "192.168.0.0/16", "0.0.0.0/0", "172.16.0.0/12"}
)

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// randomChange inserts or deletes one random input object.
func randomChange(h *syncHarness, rng *rand.Rand) {
	remove := rng.IntN(4) == 0
	switch rng.IntN(5) {
	case 0:
		ep := localEP(uint16(1+rng.IntN(4)), pick(rng, podIPs), identity.NumericIdentity(300+rng.IntN(3)))
		if remove {
			del(h, h.eps, ep)
		} else {
			put(h, h.eps, ep)
		}
	case 1:
		n := k8stest.Node(pick(rng, nodeNames), pick(rng, nodeIPs), pick(rng, podCIDRs))
		if remove {
			del(h, h.k8s.Nodes, n)
		} else {
			put(h, h.k8s.Nodes, n)
		}
	case 2:
		var cidrs []string
		if c := pick(rng, podCIDRs); c != "" {
			cidrs = append(cidrs, c)
		}
		n := k8stest.CiliumNode(pick(rng, nodeNames), pick(rng, nodeIPs), cidrs...)
		if rng.IntN(2) == 0 {
			n.Spec.HealthAddressing.IPv4 = pick(rng, podIPs)
		}
		if remove {
			del(h, h.k8s.CiliumNodes, n)
		} else {
			put(h, h.k8s.CiliumNodes, n)
		}
	case 3:
		cep := k8stest.CiliumEndpoint("ns", fmt.Sprint("ep-", rng.IntN(8)), pick(rng, podIPs), pick(rng, publishers),
			int64(400+rng.IntN(3)))
		if remove {
			del(h, h.k8s.CiliumEndpoints, cep)
		} else {
			put(h, h.k8s.CiliumEndpoints, cep)
		}
	default:
		p := &PolicyPrefixRow{Prefix: pfx(pick(rng, prefixPool)), Identity: cidr(identity.NumericIdentity(1 + rng.IntN(3))),
			InCluster: rng.IntN(2) == 0}
		if remove {
			del(h, h.prefixes, p)
		} else {
			put(h, h.prefixes, p)
		}
	}
}
