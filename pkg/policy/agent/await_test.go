package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
)

// AwaitPolicy waits for the endpoint's policy computed for its identity,
// then for every entry of it in the map: a pending entry or a removed one
// not yet gone holds it, a failed one returns its error, and a policy
// with no room is refused.
func TestAwaitPolicyWaitsForEveryEntry(t *testing.T) {
	db := statedb.New()
	tbl, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := NewEntriesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{db: db, tbl: tbl, entries: entries, mode: policy.ModeDefault}
	const ep = 3
	http := spec.PolicyEntry{Direction: spec.Ingress, Identity: 300, Protocol: 6, Port: 80}
	dns := spec.PolicyEntry{Direction: spec.Egress, Protocol: 17, Port: 53}
	old := spec.PolicyEntry{Direction: spec.Ingress, Identity: 301, Protocol: 6, Port: 80}

	await := func() <-chan error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done := make(chan error, 1)
		go func() {
			defer cancel()
			done <- a.AwaitPolicy(ctx, ep, 500)
		}()
		return done
	}
	blocked := func(done <-chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s: AwaitPolicy returned %v, want it to wait", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	returned := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("AwaitPolicy still waits")
			return nil
		}
	}
	put := func(id identity.NumericIdentity, refused *policy.Refusal, rows ...*PolicyEntryRow) {
		txn := db.WriteTxn(tbl, entries)
		if _, _, err := tbl.Insert(txn, &EndpointPolicyRow{EndpointID: ep, Identity: id, Refused: refused}); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			r.EndpointID = ep
			if _, _, err := entries.Insert(txn, r); err != nil {
				t.Fatal(err)
			}
		}
		txn.Commit()
	}

	done := await()
	put(400, nil)
	blocked(done, "policy for the endpoint's previous identity")
	put(500, nil, &PolicyEntryRow{Entry: http, Status: reconciler.StatusDone()},
		&PolicyEntryRow{Entry: dns, Status: reconciler.StatusPending()})
	blocked(done, "an entry pending")
	put(500, nil, &PolicyEntryRow{Entry: dns, Status: reconciler.StatusError(errMapFull)})
	if err := returned(done); err == nil || !strings.Contains(err.Error(), errMapFull.Error()) {
		t.Fatalf("an entry failed: AwaitPolicy returned %v, want its error", err)
	}

	put(500, nil, &PolicyEntryRow{Entry: dns, Status: reconciler.StatusDone()},
		&PolicyEntryRow{Entry: old, Deleted: true, Status: reconciler.StatusDone()})
	done = await()
	blocked(done, "a removed entry still in the table")
	txn := db.WriteTxn(entries)
	if _, _, err := entries.Delete(txn, &PolicyEntryRow{EndpointID: ep, Entry: old}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	if err := returned(done); err != nil {
		t.Fatalf("every entry in the map: AwaitPolicy returned %v", err)
	}

	put(500, &policy.Refusal{Origin: policy.Origin{Name: "big"}, Max: 16})
	if err := returned(await()); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a policy with no room: AwaitPolicy returned %v, want it refused", err)
	}
}

var errMapFull = errors.New("policy map full")
