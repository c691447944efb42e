package agent

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/ipcache"
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

// memRoutes are routes by destination, as the kernel keeps them.
type memRoutes struct {
	routes map[netip.Prefix]netip.Addr
	fail   error
}

func (m *memRoutes) UpsertRemoteNode(r spec.RemoteNode) error {
	if m.fail != nil {
		return m.fail
	}
	m.routes[r.PodCIDR] = r.IPv4
	return nil
}

func (m *memRoutes) DeleteRemoteNode(r spec.RemoteNode) error {
	if m.fail != nil {
		return m.fail
	}
	delete(m.routes, r.PodCIDR)
	return nil
}

func TestIPCacheSync(t *testing.T) {
	db, tbl, w := newIPCacheTable(t)
	routes := &memRoutes{routes: map[netip.Prefix]netip.Addr{}}
	s := newIPCacheSync(w, routes)
	addr := netip.MustParseAddr

	steps := []struct {
		name       string
		nodes      []*corev1.Node
		local      []endpoint.Endpoint
		fail       error
		wantIPC    memIPCache
		wantRoutes map[netip.Prefix]netip.Addr
		wantErr    bool
	}{
		{
			name:  "two nodes",
			nodes: []*corev1.Node{makeNode("a", "192.168.0.2", "10.0.1.0/24"), makeNode("b", "192.168.0.3", "10.0.2.0/24")},
			local: []endpoint.Endpoint{local("10.0.1.5", 300)},
			wantIPC: memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.3/32"): entry(6, ""),
				pfx("10.0.1.5/32"): entry(300, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.3")},
		},
		{
			// The route is replaced, not deleted after the new one is made.
			name:       "node b moves to another address",
			nodes:      []*corev1.Node{makeNode("a", "192.168.0.2", "10.0.1.0/24"), makeNode("b", "192.168.0.4", "10.0.2.0/24")},
			wantIPC:    memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.4/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.4")},
		},
		{
			name:       "route errors are returned and retried",
			nodes:      []*corev1.Node{makeNode("a", "192.168.0.2", "10.0.1.0/24"), makeNode("c", "192.168.0.5", "10.0.3.0/24")},
			fail:       errors.New("netlink down"),
			wantIPC:    memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.5/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.2.0/24"): addr("192.168.0.4")},
			wantErr:    true,
		},
		{
			name:       "retry succeeds",
			nodes:      []*corev1.Node{makeNode("a", "192.168.0.2", "10.0.1.0/24"), makeNode("c", "192.168.0.5", "10.0.3.0/24")},
			wantIPC:    memIPCache{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.5/32"): entry(6, "")},
			wantRoutes: map[netip.Prefix]netip.Addr{pfx("10.0.3.0/24"): addr("192.168.0.5")},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			routes.fail = st.fail
			err := s.sync(Cluster{NodeName: "a", Nodes: st.nodes, Local: st.local})
			if (err != nil) != st.wantErr {
				t.Fatalf("sync: %v, wantErr %v", err, st.wantErr)
			}
			if got := tableContents(db, tbl); !reflect.DeepEqual(got, st.wantIPC) {
				t.Errorf("ipcache\n got %v\nwant %v", got, st.wantIPC)
			}
			if !reflect.DeepEqual(routes.routes, st.wantRoutes) {
				t.Errorf("routes\n got %v\nwant %v", routes.routes, st.wantRoutes)
			}
		})
	}
}
