package desired_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/desired"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/health"
)

// kernel is what a reconciler writes: the ids it holds, failing every
// write while fail is set.
type kernel struct {
	mu   sync.Mutex
	held map[uint16]bool
	fail error
}

func (k *kernel) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, d *endpoint.EndpointRow) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail != nil {
		return k.fail
	}
	k.held[d.ID] = !d.IsTombstone()
	return nil
}

func (k *kernel) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *endpoint.EndpointRow) error {
	return nil
}

func (k *kernel) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*endpoint.EndpointRow, statedb.Revision]) error {
	return nil
}

func (k *kernel) has(id uint16) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held[id]
}

func (k *kernel) failWith(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail = err
}

// Await follows a row into the kernel and a tombstone out of it, and
// the collector takes a tombstone out of the table only once the kernel
// no longer holds what it stood for, and never a row written again.
func TestAwaitAndCollectTombstones(t *testing.T) {
	k := &kernel{held: map[uint16]bool{}}
	var db *statedb.DB
	var tbl statedb.RWTable[*endpoint.EndpointRow]
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell,
		cell.Module("tombstone-test", "Tombstones under test",
			health.JobGroup,
			cell.Provide(endpoint.NewTable),
			cell.Invoke(func(p reconciler.Params, g job.Group, t statedb.RWTable[*endpoint.EndpointRow]) error {
				db, tbl = p.DB, t
				if _, err := desired.Register(p, t, reconciler.Operations[*endpoint.EndpointRow](k)); err != nil {
					return err
				}
				desired.CollectTombstones(g, p.DB, t, endpoint.TombstoneIndex)
				return nil
			})))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write := func(id uint16, tombstone bool) statedb.Revision {
		t.Helper()
		txn := db.WriteTxn(tbl)
		if _, _, err := tbl.Insert(txn, &endpoint.EndpointRow{Endpoint: endpoint.Endpoint{ID: id}, Deleted: tombstone,
			Status: reconciler.StatusPending()}); err != nil {
			t.Fatal(err)
		}
		return tbl.Revision(txn.Commit())
	}
	await := func(id uint16, rev statedb.Revision) error {
		return desired.Await(ctx, db, tbl, endpoint.IDIndex.Query(id), rev)
	}
	inTable := func(id uint16) (*endpoint.EndpointRow, bool) {
		d, _, ok := tbl.Get(db.ReadTxn(), endpoint.IDIndex.Query(id))
		return d, ok
	}

	if err := await(1, write(1, false)); err != nil || !k.has(1) {
		t.Fatalf("Await of a new row: %v, kernel holds it: %v", err, k.has(1))
	}
	k.failWith(errors.New("device busy"))
	if err := await(1, write(1, true)); err == nil || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("Await of a tombstone that fails: %v, want the failure", err)
	}
	if _, ok := inTable(1); !ok || !k.has(1) {
		t.Fatalf("tombstone collected (%v) while the kernel still holds its row (%v)", !ok, k.has(1))
	}
	k.failWith(nil)
	testenv.Eventually(t, 10*time.Second, func() error { return await(1, 0) })
	if d, ok := inTable(1); ok || k.has(1) {
		t.Fatalf("after the retry: row %+v still in the table, or the kernel holds it: %v", d, k.has(1))
	}

	// A tombstone that a live row replaces before its removal is done
	// stays what it became.
	if err := await(2, write(2, false)); err != nil {
		t.Fatal(err)
	}
	k.failWith(errors.New("device busy"))
	_ = await(2, write(2, true))
	k.failWith(nil)
	if err := await(2, write(2, false)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the collector's turn
	if d, ok := inTable(2); !ok || d.Deleted || !k.has(2) {
		t.Fatalf("row 2 written again: in table %v (%+v), kernel holds it %v", ok, d, k.has(2))
	}
}
