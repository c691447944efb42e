package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/k8s/tables"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// What the agent's API asks the policy engine. Every question runs on
// the engine's goroutine, between two changes.

// ask runs fn on the engine's goroutine and waits for it. When ctx ends
// first, fn may still run later: the caller must then not read what fn
// writes.
func (a *Agent) ask(ctx context.Context, fn func(*policy.Engine)) error {
	done := make(chan struct{})
	a.do(func(e *policy.Engine) {
		fn(e)
		close(done)
	})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("policy engine busy: %w", context.Cause(ctx))
	}
}

// Rules lists the rules the engine holds, by origin.
func (a *Agent) Rules(ctx context.Context) ([]policy.RuleInfo, error) {
	var out []policy.RuleInfo
	if err := a.ask(ctx, func(e *policy.Engine) { out = e.RuleInfos() }); err != nil {
		return nil, err
	}
	return out, nil
}

// PolicyRevision counts the changes of the agent's policies, from 1 (no
// policy yet) as Cilium's repository revision does: once an endpoint's
// EndpointPolicyInfo.PolicyRevision reaches it, the endpoint enforces
// every policy the agent had when asked. A policy refused whole changes
// nothing and is not counted, as Cilium's agent imports nothing of a
// policy it cannot parse; its deletion is, as every removal is in Cilium.
func (a *Agent) PolicyRevision(ctx context.Context) (uint64, error) {
	var rev uint64
	if err := a.ask(ctx, func(*policy.Engine) { rev = a.policyRevision }); err != nil {
		return 0, err
	}
	return rev + 1, nil
}

// Selectors lists the selector cache.
func (a *Agent) Selectors(ctx context.Context) ([]policy.SelectorInfo, error) {
	var out []policy.SelectorInfo
	if err := a.ask(ctx, func(e *policy.Engine) { out = e.Selectors() }); err != nil {
		return nil, err
	}
	return out, nil
}

// EndpointPolicyInfo is an endpoint's policy as computed and as realized.
type EndpointPolicyInfo struct {
	policy.EndpointStatus
	// Realized is the revision the datapath holds; 0 until the first.
	Realized uint64
	// Error is the reconciler's last failure to realize it.
	Error string
	// PolicyRevision is the agent's policy revision (PolicyRevision) that
	// the datapath holds for the endpoint: every policy change up to it is
	// in its map. 0 while its entries are on their way, and while a policy
	// is refused for it.
	PolicyRevision uint64
	Entries        map[spec.PolicyEntry][]policy.Origin
}

// ErrNoEndpoint is returned for an endpoint the engine does not know.
var ErrNoEndpoint = errors.New("endpoint not known to the policy engine")

// EndpointPolicy returns endpoint id's policy.
func (a *Agent) EndpointPolicy(ctx context.Context, id uint16) (EndpointPolicyInfo, error) {
	var out EndpointPolicyInfo
	var ok bool
	var flushed uint64
	if err := a.ask(ctx, func(e *policy.Engine) {
		out.EndpointStatus, ok = e.Endpoint(id)
		out.Entries = e.Entries(id)
		flushed = a.flushedRevision
	}); err != nil {
		return EndpointPolicyInfo{}, err
	}
	if !ok {
		return out, fmt.Errorf("endpoint %d: %w", id, ErrNoEndpoint)
	}
	txn := a.db.ReadTxn()
	if r := a.realization(txn, id); r.known {
		out.Realized, out.Error = r.realized, r.err
		// Realized entries of the engine's latest revision for the
		// endpoint hold every policy change written with them; a refused
		// policy is not in force, and the endpoint realizes none after it.
		if out.Ready && out.Refused == nil && r.realized >= out.Revision {
			out.PolicyRevision = flushed + 1
		}
	}
	if out.Refused != nil {
		// What is in force: the policy of before, not what did not fit.
		out.Entries = map[spec.PolicyEntry][]policy.Origin{}
		for e := range a.entries.List(txn, EntryEndpointIndex.Query(id)) {
			if !e.Deleted {
				out.Entries[e.Entry] = e.Origins
			}
		}
	}
	return out, nil
}

// Trace judges a new connection from src to dst on protocol proto
// (spec.ProtoTCP, ...) and port, with the code that computes the maps.
func (a *Agent) Trace(ctx context.Context, src, dst policy.Peer, proto uint8, port uint16) (policy.TraceResult, error) {
	var out policy.TraceResult
	var err error
	var pods policy.PodLookup
	if a.clients != nil {
		pods = a.pod
	}
	if askErr := a.ask(ctx, func(e *policy.Engine) {
		out, err = e.TracePeers(src, dst, proto, port, pods)
	}); askErr != nil {
		return policy.TraceResult{}, askErr
	}
	if err != nil {
		return policy.TraceResult{}, err
	}
	return out, nil
}

// pod finds a pod's identity and named ports in its CiliumEndpoint.
func (a *Agent) pod(ns, name string) (identity.NumericIdentity, policy.NamedPorts, error) {
	cep, ok := tables.Get(a.db.ReadTxn(), a.in.CiliumEndpoints, ns+"/"+name)
	if !ok {
		return 0, nil, fmt.Errorf("pod %s/%s has no CiliumEndpoint", ns, name)
	}
	if cep.Status.Identity == nil {
		return 0, nil, fmt.Errorf("pod %s/%s has no identity yet", ns, name)
	}
	return identity.NumericIdentity(cep.Status.Identity.ID), policyk8s.NamedPorts(cep.Status.NamedPorts), nil
}

// DecidedBy names the rules behind a policy verdict event's cookie;
// none when no entry decided (the default drop) or the entry is an
// earlier run's.
func (a *Agent) DecidedBy(cookie uint32) []policy.Origin { return a.cookies.Origins(cookie) }

// realization is how far an endpoint's policy got into the datapath.
type realization struct {
	row      *EndpointPolicyRow
	known    bool
	realized uint64 // the revision the datapath holds
	err      string // an entry the reconciler failed to write
}

// realization reads it: the datapath holds revision R once no entry
// written at or before R is still to be reconciled.
func (a *Agent) realization(txn statedb.ReadTxn, id uint16) realization {
	var r realization
	r.row, _, r.known = a.tbl.Get(txn, EndpointIndex.Query(id))
	if !r.known {
		return r
	}
	r.realized = r.row.Revision
	for e := range a.entries.List(txn, EntryEndpointIndex.Query(id)) {
		switch e.Status.Kind {
		case reconciler.StatusKindDone:
			continue
		case reconciler.StatusKindError:
			r.err = e.Status.GetError()
		}
		r.realized = min(r.realized, e.Revision-1)
	}
	return r
}
