package hubble

import (
	"context"
	"fmt"
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
	put := func(p *policyagent.EndpointPolicy) {
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
	put(&policyagent.EndpointPolicy{EndpointID: 7, Identity: 1000, Revision: 1, Refused: large})
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(events()); n != 1 {
			return fmt.Errorf("%d events, want the refusal", n)
		}
		return nil
	})
	put(&policyagent.EndpointPolicy{EndpointID: 7, Identity: 1000, Revision: 2, Refused: large})
	put(&policyagent.EndpointPolicy{EndpointID: 7, Identity: 1000, Revision: 3})
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
