package policy_test

import (
	"context"
	"fmt"
	"slices"
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
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/policytest"
)

// The policy map follows the table: rows in, changed and out, and the
// policy of an endpoint no row names (an earlier agent's) goes.
func TestReconcilerFollowsTheTable(t *testing.T) {
	m := policytest.New()
	stray := []spec.PolicyEntry{{Direction: spec.Ingress, Identity: 400}}
	if err := m.SetPolicy(9, stray); err != nil {
		t.Fatal(err)
	}
	var db *statedb.DB
	var tbl statedb.RWTable[*policy.EndpointPolicy]
	h := health.NewHive(job.Cell, statedb.Cell, health.Cell, policy.Cell,
		cell.Provide(func() policy.MapSource { return func() policy.Map { return m } }),
		cell.Invoke(func(d *statedb.DB, t statedb.RWTable[*policy.EndpointPolicy]) { db, tbl = d, t }))
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(log, context.Background()) })

	holds := func(want map[uint16][]spec.PolicyEntry) func() error {
		return func() error {
			ids, _ := m.PolicyEndpoints()
			for id, entries := range want {
				if got := m.Policy(id); !slices.Equal(got, entries) {
					return fmt.Errorf("endpoint %d: policy %v, want %v", id, got, entries)
				}
			}
			if len(ids) != len(want) {
				return fmt.Errorf("policy for endpoints %v, want %d of them", ids, len(want))
			}
			return nil
		}
	}
	write := func(f func(statedb.WriteTxn)) {
		txn := db.WriteTxn(tbl)
		f(txn)
		txn.Commit()
	}

	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{}))

	allow := []spec.PolicyEntry{{Direction: spec.Ingress, Identity: 300, Protocol: 6, Port: 80}}
	write(func(txn statedb.WriteTxn) {
		_, _, _ = tbl.Insert(txn, &policy.EndpointPolicy{EndpointID: 3, Entries: allow, Status: reconciler.StatusPending()})
	})
	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{3: allow}))

	deny := append(slices.Clone(allow), spec.PolicyEntry{Direction: spec.Egress, Protocol: 17, Deny: true})
	write(func(txn statedb.WriteTxn) {
		_, _, _ = tbl.Insert(txn, &policy.EndpointPolicy{EndpointID: 3, Entries: deny, Status: reconciler.StatusPending()})
	})
	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{3: deny}))

	write(func(txn statedb.WriteTxn) {
		_, _, _ = tbl.Delete(txn, &policy.EndpointPolicy{EndpointID: 3})
	})
	testenv.Eventually(t, 10*time.Second, holds(map[uint16][]spec.PolicyEntry{}))
}
