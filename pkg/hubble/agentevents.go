package hubble

import (
	"context"
	"time"

	"github.com/cilium/cilium/api/v1/flow"
	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/statedb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/hubble/container"
	"github.com/cilium-go/cilium/pkg/hubble/parser"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

// agentEventsCapacity is how many agent events a node keeps, in a ring
// of their own: a flood of flows does not push them out.
const agentEventsCapacity = 1023

// agentEvents writes the agent's events for GetAgentEvents.
type agentEvents struct {
	ring *container.Ring
	node string
}

func (a *agentEvents) add(ev *flow.AgentEvent) {
	a.ring.Write(container.Event{Agent: &observer.GetAgentEventsResponse{AgentEvent: ev, NodeName: a.node, Time: timestamppb.Now()}})
}

func (a *agentEvents) started(at time.Time) {
	a.add(&flow.AgentEvent{Type: flow.AgentEventType_AGENT_STARTED,
		Notification: &flow.AgentEvent_AgentStart{AgentStart: &flow.TimeNotification{Time: timestamppb.New(at)}}})
}

// watchPolicyChanges tells of each policy whose rules were set
// (POLICY_UPDATED) or removed (POLICY_DELETED: no rules), as changes of
// the policy changes' table give them, until ctx ends: a policy's
// removal is its row's deletion.
func (a *agentEvents) watchPolicyChanges(ctx context.Context, db *statedb.DB, changes statedb.ChangeIterator[*policyagent.PolicyChangeRow]) error {
	for {
		evs, watch := changes.Next(db.ReadTxn())
		for ev := range evs {
			a.add(policyEvent(ev.Object, ev.Deleted))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		}
	}
}

// policyEvent is the agent event of a policy's change.
func policyEvent(c *policyagent.PolicyChangeRow, deleted bool) *flow.AgentEvent {
	typ := flow.AgentEventType_POLICY_UPDATED
	rules := c.Rules
	if deleted {
		rules = 0
	}
	if rules == 0 {
		typ = flow.AgentEventType_POLICY_DELETED
	}
	return &flow.AgentEvent{Type: typ, Notification: &flow.AgentEvent_PolicyUpdate{PolicyUpdate: &flow.PolicyUpdateNotification{
		Labels: parser.PolicyLabels(parser.Policy(c.Origin)), Revision: c.Revision, RuleCount: int64(rules)}}}
}

// follow calls fn with each change of tbl until ctx ends, first for
// the rows the table holds when it starts (initial set).
func follow[Obj any](ctx context.Context, db *statedb.DB, tbl statedb.Table[Obj], fn func(ev statedb.Change[Obj], initial bool)) error {
	wtxn := db.WriteTxn(tbl)
	changes, err := tbl.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return err
	}
	for initial := true; ; initial = false {
		evs, watch := changes.Next(db.ReadTxn())
		for ev := range evs {
			fn(ev, initial)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		}
	}
}

// watchEndpoints tells of each endpoint created and deleted after the
// endpoints the table held when it started.
func (a *agentEvents) watchEndpoints(ctx context.Context, db *statedb.DB, tbl statedb.Table[*endpoint.EndpointRow],
	labels func(identity.NumericIdentity) ([]string, bool)) error {
	known := map[uint16]bool{}
	return follow(ctx, db, tbl, func(ev statedb.Change[*endpoint.EndpointRow], initial bool) {
		d := ev.Object
		typ := flow.AgentEventType_ENDPOINT_CREATED
		switch {
		case ev.Deleted:
			typ = flow.AgentEventType_ENDPOINT_DELETED
			delete(known, d.ID)
		case known[d.ID]:
			return // an update
		default:
			known[d.ID] = true
		}
		if initial {
			return
		}
		ls, _ := labels(d.Identity)
		a.add(&flow.AgentEvent{Type: typ, Notification: &flow.AgentEvent_EndpointUpdate{EndpointUpdate: &flow.EndpointUpdateNotification{
			Id: uint64(d.ID), Labels: ls, PodName: d.PodName, Namespace: d.PodNamespace}}})
	})
}

// watchRefusals tells of each endpoint whose policy its map cannot hold
// (ENDPOINT_REGENERATE_FAILURE, naming the policy), and of each whose
// policy fits again (ENDPOINT_REGENERATE_SUCCESS).
func (a *agentEvents) watchRefusals(ctx context.Context, db *statedb.DB, tbl statedb.Table[*policyagent.EndpointPolicyRow],
	labels func(identity.NumericIdentity) ([]string, bool)) error {
	refused := map[uint16]policy.Refusal{}
	regen := func(typ flow.AgentEventType, p *policyagent.EndpointPolicyRow, err string) {
		ls, _ := labels(p.Identity)
		a.add(&flow.AgentEvent{Type: typ, Notification: &flow.AgentEvent_EndpointRegenerate{
			EndpointRegenerate: &flow.EndpointRegenNotification{Id: uint64(p.EndpointID), Labels: ls, Error: err}}})
	}
	return follow(ctx, db, tbl, func(ev statedb.Change[*policyagent.EndpointPolicyRow], _ bool) {
		p := ev.Object
		prev, was := refused[p.EndpointID]
		switch {
		case !ev.Deleted && p.Refused != nil && (!was || prev != *p.Refused):
			refused[p.EndpointID] = *p.Refused
			regen(flow.AgentEventType_ENDPOINT_REGENERATE_FAILURE, p, p.Refused.String())
		case was && (ev.Deleted || p.Refused == nil):
			delete(refused, p.EndpointID)
			if !ev.Deleted {
				regen(flow.AgentEventType_ENDPOINT_REGENERATE_SUCCESS, p, "")
			}
		}
	})
}
