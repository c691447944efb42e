package hubble

import (
	"net/netip"
	"testing"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
)

// A cookie names the endpoint whose namespace was measured with it while
// that endpoint keeps its id and namespace; cookies not known measure the
// namespaces not measured yet, at most once a rescan interval.
func TestNetNSEndpoints(t *testing.T) {
	db := statedb.New()
	tbl, err := endpoint.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	put := func(id uint16, path, ip string) {
		txn := db.WriteTxn(tbl)
		if _, _, err := tbl.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: id, NetNSPath: path,
			ContainerID: path, IPv4: netip.MustParseAddr(ip)}}); err != nil {
			t.Fatal(err)
		}
		txn.Commit()
	}
	cookies := map[string]uint64{"/run/netns/a": 11, "/run/netns/b": 12, "/run/netns/c": 13}
	var measured []string
	n := newNetNSEndpoints(db, tbl, func(path string) (uint64, error) {
		measured = append(measured, path)
		return cookies[path], nil
	})
	put(1, "/run/netns/a", "10.0.0.1")
	if id, addr, ok := n.lookup(11); !ok || id != 1 || addr != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("cookie 11: %d %v %v, want endpoint 1 at 10.0.0.1", id, addr, ok)
	}
	// A cookie of no endpoint's namespace (the node's own processes)
	// does not measure again within the interval.
	if _, _, ok := n.lookup(99); ok {
		t.Fatal("cookie 99 named an endpoint")
	}
	if len(measured) != 1 {
		t.Fatalf("measured %v, want /run/netns/a once", measured)
	}
	// A new endpoint is found on the next scan; one measured is not
	// measured again.
	put(2, "/run/netns/b", "10.0.0.2")
	n.rescan = 0
	if id, _, ok := n.lookup(12); !ok || id != 2 {
		t.Fatalf("cookie 12: %d %v, want endpoint 2", id, ok)
	}
	if len(measured) != 2 || measured[1] != "/run/netns/b" {
		t.Fatalf("measured %v, want a, then b alone", measured)
	}
	// Id 1 now belongs to a pod of another namespace: the old cookie
	// does not name it.
	put(1, "/run/netns/c", "10.0.0.3")
	if id, _, ok := n.lookup(11); ok {
		t.Fatalf("cookie 11 of the gone namespace named endpoint %d", id)
	}
	if id, addr, ok := n.lookup(13); !ok || id != 1 || addr != netip.MustParseAddr("10.0.0.3") {
		t.Fatalf("cookie 13: %d %v %v, want endpoint 1 at 10.0.0.3", id, addr, ok)
	}
}
