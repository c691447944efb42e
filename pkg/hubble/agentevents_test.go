package hubble

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/statedb"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

// An endpoint whose policy its map cannot hold is told of once, naming
// the policy (ENDPOINT_REGENERATE_FAILURE), and again once it fits
// (ENDPOINT_REGENERATE_SUCCESS); a revision that changes nothing about
// it says nothing.
func TestAgentEventsTellOfRefusals(t *testing.T) {
	db := statedb.New()
	tbl, err := policyagent.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := container.NewRing(15)
	if err != nil {
		t.Fatal(err)
	}
	a := &agentEvents{ring: ring, node: "n1"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- a.watchRefusals(ctx, db, tbl, func(identity.NumericIdentity) ([]string, bool) {
			return []string{"k8s:app=web"}, true
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	put := func(p *policyagent.EndpointPolicyRow) {
		txn := db.WriteTxn(tbl)
		if _, _, err := tbl.Insert(txn, p); err != nil {
			t.Fatal(err)
		}
		txn.Commit()
	}
	events := func() []*flow.AgentEvent {
		var out []*flow.AgentEvent
		_, next := ring.Bounds()
		for i := range next {
			if ev, _, ok := ring.At(i); ok {
				out = append(out, ev.Agent.GetAgentEvent())
			}
		}
		return out
	}
	large := &policy.Refusal{Origin: policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "large"}, Max: 16384}
	put(&policyagent.EndpointPolicyRow{EndpointID: 7, Identity: 1000, Revision: 1, Refused: large})
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(events()); n != 1 {
			return fmt.Errorf("%d events, want the refusal", n)
		}
		return nil
	})
	put(&policyagent.EndpointPolicyRow{EndpointID: 7, Identity: 1000, Revision: 2, Refused: large})
	put(&policyagent.EndpointPolicyRow{EndpointID: 7, Identity: 1000, Revision: 3})
	testenv.Eventually(t, 10*time.Second, func() error {
		evs := events()
		if len(evs) != 2 {
			return fmt.Errorf("%d events: %v", len(evs), evs)
		}
		fail, ok := evs[0].GetNotification().(*flow.AgentEvent_EndpointRegenerate)
		if evs[0].Type != flow.AgentEventType_ENDPOINT_REGENERATE_FAILURE || !ok || fail.EndpointRegenerate.Id != 7 ||
			!strings.Contains(fail.EndpointRegenerate.Error, "CiliumNetworkPolicy/x/large") {
			return fmt.Errorf("first event %v, want the refusal of endpoint 7 naming the policy", evs[0])
		}
		if evs[1].Type != flow.AgentEventType_ENDPOINT_REGENERATE_SUCCESS {
			return fmt.Errorf("second event %v, want endpoint 7 fitting again", evs[1])
		}
		return nil
	})
}

// Each change of a policy's row is told of: POLICY_UPDATED with its rule
// count and revision while it has rules, POLICY_DELETED when its row goes
// with the revision of the removal, which the row's last state carries.
func TestAgentEventsTellOfPolicyChanges(t *testing.T) {
	db := statedb.New()
	tbl, err := policyagent.NewPolicyChangesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := container.NewRing(15)
	if err != nil {
		t.Fatal(err)
	}
	a := &agentEvents{ring: ring, node: "n1"}
	wtxn := db.WriteTxn(tbl)
	changes, err := tbl.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.watchPolicyChanges(ctx, db, changes) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	origin := policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "web"}
	events := func() []*flow.AgentEvent {
		var out []*flow.AgentEvent
		_, next := ring.Bounds()
		for i := range next {
			if ev, _, ok := ring.At(i); ok {
				out = append(out, ev.Agent.GetAgentEvent())
			}
		}
		return out
	}
	awaitEvents := func(n int) {
		testenv.Eventually(t, 10*time.Second, func() error {
			if got := len(events()); got != n {
				return fmt.Errorf("%d events, want %d", got, n)
			}
			return nil
		})
	}
	txn := db.WriteTxn(tbl)
	_, _, _ = tbl.Insert(txn, &policyagent.PolicyChangeRow{Origin: origin, Rules: 2, Revision: 4})
	txn.Commit()
	awaitEvents(1)
	// A removal as the policy engine writes it: the row's last state, then
	// its deletion, in one transaction.
	txn = db.WriteTxn(tbl)
	_, _, _ = tbl.Insert(txn, &policyagent.PolicyChangeRow{Origin: origin, Rules: 0, Revision: 5})
	_, _, _ = tbl.Delete(txn, &policyagent.PolicyChangeRow{Origin: origin})
	txn.Commit()
	awaitEvents(2)

	want := []struct {
		typ       flow.AgentEventType
		rules     int64
		revision  uint64
		nameLabel string
	}{
		{flow.AgentEventType_POLICY_UPDATED, 2, 4, "k8s:io.cilium.k8s.policy.name=web"},
		{flow.AgentEventType_POLICY_DELETED, 0, 5, "k8s:io.cilium.k8s.policy.name=web"},
	}
	for i, ev := range events() {
		u := ev.GetPolicyUpdate()
		w := want[i]
		if ev.Type != w.typ || u == nil || u.RuleCount != w.rules || u.Revision != w.revision || !slices.Contains(u.Labels, w.nameLabel) {
			t.Errorf("event %d: %v, want %v with %d rules, revision %d, labels with %s", i, ev, w.typ, w.rules, w.revision, w.nameLabel)
		}
	}
}
