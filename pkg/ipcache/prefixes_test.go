package ipcache_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	"github.com/cilium-go/cilium/pkg/ipcache/ipcachetest"
	"github.com/cilium-go/cilium/pkg/node"
	"github.com/cilium-go/cilium/pkg/node/nodetest"
)

// With the policy engine, the ipcache waits for the engine's first write
// of the prefixes (the table's initialization), so that its first
// entries, which let the reconciler prune, already hold them; it then
// follows their changes.
func TestIPCacheWaitsForThePolicyPrefixes(t *testing.T) {
	var (
		db       *statedb.DB
		prefixes statedb.RWTable[*ipcache.PolicyPrefixRow]
		entries  statedb.Table[*ipcache.EntryRow]
		done     func(statedb.WriteTxn)
	)
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell,
		cell.Provide(endpoint.NewTable, statedb.RWTable[*endpoint.EndpointRow].ToTable,
			ipcache.NewPrefixesTable, statedb.RWTable[*ipcache.PolicyPrefixRow].ToTable,
			func() ipcache.MapSource { m := ipcachetest.New(nil); return func() ipcache.Map { return m } },
			func() node.Routes { return nodetest.New(nil) }),
		ipcache.Cell,
		cell.Invoke(func(d *statedb.DB, p statedb.RWTable[*ipcache.PolicyPrefixRow], e statedb.Table[*ipcache.EntryRow]) {
			db, prefixes, entries = d, p, e
			txn := d.WriteTxn(p)
			done = p.RegisterInitializer(txn, "policy-engine")
			txn.Commit()
		}))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })

	_, initialized := entries.Initialized(db.ReadTxn())
	select {
	case <-initialized:
		t.Fatal("the ipcache was written before the policy engine's first prefixes")
	case <-time.After(time.Second):
	}

	world := &ipcache.PolicyPrefixRow{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Identity: identity.LocalIdentityFlag | 1}
	txn := db.WriteTxn(prefixes)
	if _, _, err := prefixes.Insert(txn, world); err != nil {
		t.Fatal(err)
	}
	done(txn)
	txn.Commit()
	select {
	case <-initialized:
	case <-time.After(30 * time.Second):
		t.Fatal("the ipcache was not written after the policy engine's first prefixes")
	}
	if e, _, ok := entries.Get(db.ReadTxn(), ipcache.PrefixIndex.Query(world.Prefix)); !ok || e.Identity != world.Identity {
		t.Fatalf("the first ipcache lacks the world prefix: %+v", e)
	}

	// A change of the prefixes reaches the ipcache.
	txn = db.WriteTxn(prefixes)
	if _, _, err := prefixes.Delete(txn, world); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	deadline := time.After(30 * time.Second)
	for {
		_, _, watch, ok := entries.GetWatch(db.ReadTxn(), ipcache.PrefixIndex.Query(world.Prefix))
		if !ok {
			break
		}
		select {
		case <-watch:
		case <-deadline:
			t.Fatal("the world prefix stayed in the ipcache after it left the policy prefixes")
		}
	}
}
