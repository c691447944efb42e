package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
)

// What the agent's API asks the policy engine. Every question runs on
// the engine's goroutine, between two changes.

// ask runs fn on the engine's goroutine and waits for it. When ctx ends
// first, fn may still run later: the caller must then not read what fn
// writes.
func (a *Agent) ask(ctx context.Context, fn func(*Engine)) error {
	done := make(chan struct{})
	a.do(func(e *Engine) {
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

// RuleInfo describes one rule the engine holds.
type RuleInfo struct {
	Origin      Origin
	Subject     string
	Direction   spec.Direction
	Deny        bool
	DefaultDeny bool
	Peers       []string
	Ports       []string
}

// Rules lists the rules the engine holds, by origin.
func (a *Agent) Rules(ctx context.Context) ([]RuleInfo, error) {
	var out []RuleInfo
	err := a.ask(ctx, func(e *Engine) {
		for _, o := range slices.SortedFunc(maps.Keys(e.rules), compareOrigins) {
			for _, r := range e.rules[o] {
				ri := RuleInfo{Origin: o, Subject: r.Subject.Key(), Direction: r.Direction, Deny: r.Deny,
					DefaultDeny: r.DefaultDeny}
				for _, p := range r.Peers {
					ri.Peers = append(ri.Peers, p.Key())
				}
				for _, p := range r.Ports {
					ri.Ports = append(ri.Ports, p.String())
				}
				out = append(out, ri)
			}
		}
	})
	if err != nil {
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
	if err := a.ask(ctx, func(*Engine) { rev = a.policyRevision }); err != nil {
		return 0, err
	}
	return rev + 1, nil
}

// SelectorInfo is a selector in use and the identities it selects.
type SelectorInfo struct {
	Selector   string
	Identities []identity.NumericIdentity
	// Users counts the endpoint filters that use it.
	Users int
}

// Selectors lists the selector cache.
func (a *Agent) Selectors(ctx context.Context) ([]SelectorInfo, error) {
	var out []SelectorInfo
	err := a.ask(ctx, func(e *Engine) {
		for _, key := range slices.Sorted(maps.Keys(e.cache.sels)) {
			cs := e.cache.sels[key]
			out = append(out, SelectorInfo{Selector: key, Identities: slices.Sorted(maps.Keys(cs.ids)), Users: len(cs.users)})
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EndpointPolicyInfo is an endpoint's policy as computed and as realized.
type EndpointPolicyInfo struct {
	EndpointStatus
	// Realized is the revision the datapath holds; 0 until the first.
	Realized uint64
	// Error is the reconciler's last failure to realize it.
	Error string
	// PolicyRevision is the agent's policy revision (PolicyRevision) that
	// the datapath holds for the endpoint: every policy change up to it is
	// in its map. 0 while its entries are on their way, and while a policy
	// is refused for it.
	PolicyRevision uint64
	Entries        map[spec.PolicyEntry][]Origin
}

// ErrNoEndpoint is returned for an endpoint the engine does not know.
var ErrNoEndpoint = errors.New("endpoint not known to the policy engine")

// EndpointPolicy returns endpoint id's policy.
func (a *Agent) EndpointPolicy(ctx context.Context, id uint16) (EndpointPolicyInfo, error) {
	var out EndpointPolicyInfo
	var ok bool
	var flushed uint64
	if err := a.ask(ctx, func(e *Engine) {
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
		out.Entries = map[spec.PolicyEntry][]Origin{}
		for e := range a.entries.List(txn, EntryEndpointIndex.Query(id)) {
			if !e.Deleted {
				out.Entries[e.Entry] = e.Origins
			}
		}
	}
	return out, nil
}

// Peer names one side of a traced connection: an identity number, a pod
// ("namespace/name", from its CiliumEndpoint), or labels
// ("k8s:app=web k8s:io.kubernetes.pod.namespace=x").
type Peer string

// TraceResult is the verdict on a connection from a source to a
// destination: the source's egress and the destination's ingress.
type TraceResult struct {
	Source, Destination Identity
	Egress, Ingress     Verdict
	Allowed             bool
}

// Trace judges a new connection from src to dst on protocol proto
// (spec.ProtoTCP, ...) and port, with the code that computes the maps.
func (a *Agent) Trace(ctx context.Context, src, dst Peer, proto uint8, port uint16) (TraceResult, error) {
	var out TraceResult
	var err error
	if askErr := a.ask(ctx, func(e *Engine) {
		var s, d *Identity
		var sPorts, dPorts NamedPorts
		if s, sPorts, err = a.resolve(e, src); err != nil {
			err = fmt.Errorf("source: %w", err)
			return
		}
		if d, dPorts, err = a.resolve(e, dst); err != nil {
			err = fmt.Errorf("destination: %w", err)
			return
		}
		out.Source, out.Destination = *s, *d
		out.Egress = e.Trace(s, sPorts, spec.Egress, d, proto, port)
		out.Ingress = e.Trace(d, dPorts, spec.Ingress, s, proto, port)
		out.Allowed = out.Egress.Allowed && out.Ingress.Allowed
	}); askErr != nil {
		return TraceResult{}, askErr
	}
	if err != nil {
		return TraceResult{}, err
	}
	return out, nil
}

// resolve finds the identity and named ports a peer stands for.
func (a *Agent) resolve(e *Engine, p Peer) (*Identity, NamedPorts, error) {
	s := strings.TrimSpace(string(p))
	if s == "" {
		return nil, nil, errors.New("empty")
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		id, ok := e.Identity(identity.NumericIdentity(n))
		if !ok {
			return nil, nil, fmt.Errorf("identity %d is not known", n)
		}
		return id, e.namedPorts[id.ID], nil
	}
	if ns, name, ok := strings.Cut(s, "/"); ok && !strings.ContainsAny(s, "=: ") {
		return a.resolvePod(e, ns, name)
	}
	ls := labels.Labels{}
	for _, f := range strings.Fields(s) {
		l := labels.Parse(f)
		if l.Key == "" {
			return nil, nil, fmt.Errorf("label %q: no key", f)
		}
		ls.Add(l)
	}
	for _, id := range e.cache.ids {
		if id.ID != identity.Unknown && !id.Prefix.IsValid() && id.Labels.Equal(ls) {
			return id, e.namedPorts[id.ID], nil
		}
	}
	// Labels no identity has yet: judged as such an identity would be.
	return &Identity{Labels: ls}, nil, nil
}

func (a *Agent) resolvePod(e *Engine, ns, name string) (*Identity, NamedPorts, error) {
	if a.watchers == nil {
		return nil, nil, errors.New("pods need Kubernetes")
	}
	cep, ok := a.watchers.CiliumEndpoint(ns, name)
	if !ok {
		return nil, nil, fmt.Errorf("pod %s/%s has no CiliumEndpoint", ns, name)
	}
	if cep.Status.Identity == nil {
		return nil, nil, fmt.Errorf("pod %s/%s has no identity yet", ns, name)
	}
	id, ok := e.Identity(identity.NumericIdentity(cep.Status.Identity.ID))
	if !ok {
		return nil, nil, fmt.Errorf("pod %s/%s: identity %d is not known", ns, name, cep.Status.Identity.ID)
	}
	return id, namedPorts(cep.Status.NamedPorts), nil
}

// DecidedBy names the rules behind a policy verdict event's cookie;
// none when no entry decided (the default drop) or the entry is an
// earlier run's.
func (a *Agent) DecidedBy(cookie uint32) []Origin { return a.cookies.Origins(cookie) }
