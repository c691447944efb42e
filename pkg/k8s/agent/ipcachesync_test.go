package agent

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/node"
)

// memIPCache is the desired ipcache as the table holds it.
type memIPCache map[netip.Prefix]spec.IPCacheEntry

// newIPCacheTable is an empty ipcache table and its writer.
func newIPCacheTable(t *testing.T) (*statedb.DB, statedb.Table[*ipcache.Entry], *ipcache.Writer) {
	t.Helper()
	db := statedb.New()
	tbl, err := ipcache.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl, ipcache.NewWriter(db, tbl)
}

func tableContents(db *statedb.DB, tbl statedb.Table[*ipcache.Entry]) memIPCache {
	out := memIPCache{}
	for e := range tbl.All(db.ReadTxn()) {
		out[e.Prefix] = e.Value()
	}
	return out
}

func nodesContents(db *statedb.DB, tbl statedb.Table[*node.Remote]) map[netip.Prefix]netip.Addr {
	out := map[netip.Prefix]netip.Addr{}
	for r := range tbl.All(db.ReadTxn()) {
		out[r.PodCIDR] = r.IPv4
	}
	return out
}

func TestIPCacheSync(t *testing.T) {
	db, tbl, w := newIPCacheTable(t)
	nodes, err := node.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	s := &ipcacheSync{ipcache: w, nodes: node.NewWriter(db, nodes)}
	addr := netip.MustParseAddr

	steps := []struct {
		name       string
		nodes      []*corev1.Node
		local      []endpoint.Endpoint
		wantIPC    memIPCache
		wantRoutes map[netip.Prefix]netip.Addr
	}{
		{
			name:  "two nodes",
			nodes: []*corev1.Node{k8stest.Node("a", "192.168.0.2", "10.0.1.0/24"), k8stest.Node("b", "192.168.0.3", "10.0.2.0/24")},
			local: []endpoint.Endpoint{local("10.0.1.5", 300)},
			wantIPC: memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.3/32"): entry(6, ""),
				pfx("10.0.1.5/32"): entry(300, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.3")},
		},
		{
			// The route is replaced, not deleted after the new one is made.
			name:       "node b moves to another address",
			nodes:      []*corev1.Node{k8stest.Node("a", "192.168.0.2", "10.0.1.0/24"), k8stest.Node("b", "192.168.0.4", "10.0.2.0/24")},
			wantIPC:    memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.4/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.4")},
		},
		{
			name:       "node b leaves, c joins",
			nodes:      []*corev1.Node{k8stest.Node("a", "192.168.0.2", "10.0.1.0/24"), k8stest.Node("c", "192.168.0.5", "10.0.3.0/24")},
			wantIPC:    memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.5/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.3.0/24"): addr("192.168.0.5")},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			s.cluster = func(local []endpoint.Endpoint) Cluster {
				return Cluster{NodeName: "a", Nodes: st.nodes, Local: local}
			}
			if err := s.sync(context.Background(), st.local); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got := tableContents(db, tbl); !reflect.DeepEqual(got, st.wantIPC) {
				t.Errorf("ipcache\n got %v\nwant %v", got, st.wantIPC)
			}
			if got := nodesContents(db, nodes); !reflect.DeepEqual(got, st.wantRoutes) {
				t.Errorf("remote nodes\n got %v\nwant %v", got, st.wantRoutes)
			}
		})
	}
}
