package policy

import (
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

// What the agent's API asks of the engine: the rules, the selector
// cache, and the verdict on a connection.

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

// RuleInfos lists the rules the engine holds, by origin.
func (e *Engine) RuleInfos() []RuleInfo {
	var out []RuleInfo
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
	return out
}

// SelectorInfo is a selector in use and the identities it selects.
type SelectorInfo struct {
	Selector   string
	Identities []identity.NumericIdentity
	// Users counts the endpoint filters that use it.
	Users int
}

// Selectors lists the selector cache.
func (e *Engine) Selectors() []SelectorInfo {
	var out []SelectorInfo
	for _, key := range slices.Sorted(maps.Keys(e.cache.sels)) {
		cs := e.cache.sels[key]
		out = append(out, SelectorInfo{Selector: key, Identities: slices.Sorted(maps.Keys(cs.ids)), Users: len(cs.users)})
	}
	return out
}

// Peer names one side of a traced connection: an identity number, a pod
// ("namespace/name", from its CiliumEndpoint), or labels
// ("k8s:app=web k8s:io.kubernetes.pod.namespace=x").
type Peer string

// PodLookup finds the identity and named ports of a pod, which only the
// cluster knows.
type PodLookup func(namespace, name string) (identity.NumericIdentity, NamedPorts, error)

// TraceResult is the verdict on a connection from a source to a
// destination: the source's egress and the destination's ingress.
type TraceResult struct {
	Source, Destination Identity
	Egress, Ingress     Verdict
	Allowed             bool
}

// TracePeers judges a new connection from src to dst on protocol proto
// (spec.ProtoTCP, ...) and port, with the code that computes the maps.
// pods resolves peers named as pods; nil: there are none.
func (e *Engine) TracePeers(src, dst Peer, proto uint8, port uint16, pods PodLookup) (TraceResult, error) {
	s, sPorts, err := e.resolve(src, pods)
	if err != nil {
		return TraceResult{}, fmt.Errorf("source: %w", err)
	}
	d, dPorts, err := e.resolve(dst, pods)
	if err != nil {
		return TraceResult{}, fmt.Errorf("destination: %w", err)
	}
	out := TraceResult{Source: *s, Destination: *d}
	out.Egress = e.Trace(s, sPorts, spec.Egress, d, proto, port)
	out.Ingress = e.Trace(d, dPorts, spec.Ingress, s, proto, port)
	out.Allowed = out.Egress.Allowed && out.Ingress.Allowed
	return out, nil
}

// resolve finds the identity and named ports a peer stands for.
func (e *Engine) resolve(p Peer, pods PodLookup) (*Identity, NamedPorts, error) {
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
		return e.resolvePod(ns, name, pods)
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

func (e *Engine) resolvePod(ns, name string, pods PodLookup) (*Identity, NamedPorts, error) {
	if pods == nil {
		return nil, nil, errors.New("pods need Kubernetes")
	}
	num, ports, err := pods(ns, name)
	if err != nil {
		return nil, nil, err
	}
	id, ok := e.Identity(num)
	if !ok {
		return nil, nil, fmt.Errorf("pod %s/%s: identity %d is not known", ns, name, num)
	}
	return id, ports, nil
}
