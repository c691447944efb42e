package agent

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/policy"
)

// The prefixes table follows the engine's prefixes, rewriting only the
// rows that changed: the ipcache recomputes the addresses under those.
func TestWritePrefixesRewritesOnlyChangedRows(t *testing.T) {
	db := statedb.New()
	tbl, err := ipcache.NewPrefixesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	p := func(s string, id identity.NumericIdentity, inCluster bool) policy.Prefix {
		return policy.Prefix{Prefix: netip.MustParsePrefix(s), Identity: identity.LocalIdentityFlag | id, InCluster: inCluster}
	}
	// rows are the table's rows by key, with the revision of their write.
	rows := func() map[ipcache.PrefixKey]statedb.Revision {
		out := map[ipcache.PrefixKey]statedb.Revision{}
		for r, rev := range tbl.All(db.ReadTxn()) {
			out[r.Key()] = rev
		}
		return out
	}
	write := func(prefixes ...policy.Prefix) {
		t.Helper()
		txn := db.WriteTxn(tbl)
		if err := writePrefixes(txn, tbl, prefixes); err != nil {
			t.Fatal(err)
		}
		txn.Commit()
	}
	world, inCluster, other := p("10.0.0.0/8", 1, false), p("10.0.0.0/8", 2, true), p("192.168.0.0/16", 3, false)
	write(world, inCluster, other)
	before := rows()
	if len(before) != 3 {
		t.Fatalf("rows %v, want the world's and the cluster's 10.0.0.0/8 and 192.168.0.0/16", before)
	}

	moved := p("192.168.0.0/16", 4, false)
	write(world, moved)
	after := rows()
	want := maps.Clone(before)
	delete(want, ipcache.PrefixKey{Prefix: inCluster.Prefix, InCluster: true})
	want[ipcache.PrefixKey{Prefix: moved.Prefix}] = after[ipcache.PrefixKey{Prefix: moved.Prefix}]
	if !maps.Equal(after, want) || after[ipcache.PrefixKey{Prefix: moved.Prefix}] == before[ipcache.PrefixKey{Prefix: moved.Prefix}] {
		t.Errorf("rows by revision\nbefore %v\n after %v\nwant the in-cluster row gone, 192.168.0.0/16 rewritten, the world's 10.0.0.0/8 untouched", before, after)
	}
	if r, _, ok := tbl.Get(db.ReadTxn(), ipcache.PrefixKeyIndex.Query(ipcache.PrefixKey{Prefix: moved.Prefix})); !ok || r.Identity != moved.Identity {
		t.Errorf("192.168.0.0/16: %+v, want identity %d", r, moved.Identity)
	}
}
