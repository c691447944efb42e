package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/health"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
	"github.com/cilium-go/cilium/pkg/policy/policytest"
)

// The policy map follows the entries table group by group: rows in and
// out, tombstones removing their entries, a narrowed group flushing its
// endpoint's connections, and the groups no row names (an earlier
// agent's) going once the table is initialized.
func TestReconcilerFollowsTheTable(t *testing.T) {
	m := policytest.New()
	stray := spec.PolicyEntry{Direction: spec.Ingress, Identity: 400}
	if _, err := m.UpdatePolicy(9, map[spec.PolicyGroup][]spec.PolicyEntry{stray.Group(9): {stray}}); err != nil {
		t.Fatal(err)
	}
	var db *statedb.DB
	var tbl statedb.RWTable[*policyagent.PolicyEntryRow]
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, policyagent.Cell,
		cell.Provide(func() policyagent.MapSource { return func() policyagent.Map { return m } }),
		cell.Invoke(func(d *statedb.DB, t statedb.RWTable[*policyagent.PolicyEntryRow]) { db, tbl = d, t }))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })

	holds := func(want map[uint16][]spec.PolicyEntry) func() error {
		return func() error {
			for id, entries := range want {
				entries = slices.SortedFunc(slices.Values(entries), func(a, b spec.PolicyEntry) int {
					return strings.Compare(a.String(), b.String())
				})
				if got := m.Policy(id); !slices.Equal(got, entries) {
					return fmt.Errorf("endpoint %d: policy %v, want %v", id, got, entries)
				}
			}
			if ids := m.Endpoints(); len(ids) != len(want) {
				return fmt.Errorf("policy for endpoints %v, want %d of them", ids, len(want))
			}
			return nil
		}
	}
	write := func(rows ...*policyagent.PolicyEntryRow) {
		txn := db.WriteTxn(tbl)
		for _, r := range rows {
			r.Status = reconciler.StatusPending()
			_, _, _ = tbl.Insert(txn, r)
		}
		txn.Commit()
	}
	// The table has no initializer here: the stray group goes at once.
	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{}))

	http := spec.PolicyEntry{Direction: spec.Ingress, Identity: 300, Protocol: 6, Port: 80}
	https := spec.PolicyEntry{Direction: spec.Ingress, Identity: 300, Protocol: 6, Port: 443}
	dns := spec.PolicyEntry{Direction: spec.Egress, Protocol: 17, Port: 53}
	write(&policyagent.PolicyEntryRow{EndpointID: 3, Entry: http}, &policyagent.PolicyEntryRow{EndpointID: 3, Entry: https},
		&policyagent.PolicyEntryRow{EndpointID: 3, Entry: dns})
	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{3: {http, https, dns}}))
	if n := m.Flushed(3); n != 0 {
		t.Fatalf("endpoint 3 flushed %d times while its policy only grew", n)
	}

	// A tombstone takes its entry out, and the group narrowed.
	write(&policyagent.PolicyEntryRow{EndpointID: 3, Entry: https, Deleted: true})
	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{3: {http, dns}}))
	testenv.Eventually(t, 10*time.Second, func() error {
		if m.Flushed(3) == 0 {
			return fmt.Errorf("endpoint 3's connections not judged again after its policy narrowed")
		}
		return nil
	})
}
