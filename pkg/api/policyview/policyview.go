// Package policyview shows the policy engine through the REST API: it
// answers server.PolicyExplainer from the engine's own answers. It lives
// apart from both because the engine's package already depends, through
// the Kubernetes watchers, on the server's.
package policyview

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/cilium/hive/cell"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

// Cell provides the API's view of the policy engine.
var Cell = cell.Module("policy-api", "Policy rules and selectors and verdicts for the REST API",
	cell.Provide(New),
)

// Engine is what the view asks; *policyagent.Agent is one.
type Engine interface {
	Rules(ctx context.Context) ([]policy.RuleInfo, error)
	Selectors(ctx context.Context) ([]policy.SelectorInfo, error)
	EndpointPolicy(ctx context.Context, id uint16) (policyagent.EndpointPolicyInfo, error)
	Trace(ctx context.Context, src, dst policy.Peer, proto uint8, port uint16) (policy.TraceResult, error)
	PolicyRevision(ctx context.Context) (uint64, error)
}

var (
	_ Engine                 = (*policyagent.Agent)(nil)
	_ server.PolicyExplainer = View{}
)

// New shows the agent's policy engine to the API.
func New(a *policyagent.Agent) server.PolicyExplainer { return View{Engine: a} }

// View implements server.PolicyExplainer over an Engine.
type View struct {
	Engine Engine
}

// PolicyRules implements server.PolicyExplainer.
func (v View) PolicyRules(ctx context.Context) ([]models.PolicyRule, error) {
	rules, err := v.Engine.Rules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]models.PolicyRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, models.PolicyRule{Origin: origin(r.Origin), Subject: r.Subject, Direction: r.Direction.String(),
			Verdict: verdict(r.Deny), DefaultDeny: r.DefaultDeny, Peers: orEmpty(r.Peers), Ports: orEmpty(r.Ports)})
	}
	return out, nil
}

// PolicySelectors implements server.PolicyExplainer.
func (v View) PolicySelectors(ctx context.Context) ([]models.PolicySelector, error) {
	sels, err := v.Engine.Selectors(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]models.PolicySelector, 0, len(sels))
	for _, s := range sels {
		out = append(out, models.PolicySelector{Selector: s.Selector, Identities: orEmpty(s.Identities), Users: s.Users})
	}
	return out, nil
}

// EndpointPolicy implements server.PolicyExplainer.
func (v View) EndpointPolicy(ctx context.Context, id uint16) (*models.EndpointPolicy, error) {
	info, err := v.Engine.EndpointPolicy(ctx, id)
	if errors.Is(err, policyagent.ErrNoEndpoint) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := &models.EndpointPolicy{Identity: info.Identity, Revision: info.Revision, Realized: info.Realized,
		PolicyRevision: info.PolicyRevision,
		Ready:          info.Ready, EnforceIngress: info.EnforceIngress, EnforceEgress: info.EnforceEgress, Error: info.Error,
		Entries: make([]models.PolicyEntry, 0, len(info.Entries))}
	if info.Refused != nil {
		out.Refused = info.Refused.String()
	}
	for _, e := range slices.SortedFunc(maps.Keys(info.Entries), spec.ComparePolicyEntries) {
		out.Entries = append(out.Entries, models.PolicyEntry{Direction: e.Direction.String(), Identity: e.Identity,
			Protocol: e.Protocol, Port: e.Port, EndPort: e.EndPort, Verdict: verdict(e.Deny), ProxyPort: e.ProxyPort,
			Origins: origins(info.Entries[e])})
	}
	return out, nil
}

// PolicyRevision implements server.PolicyExplainer.
func (v View) PolicyRevision(ctx context.Context) (uint64, error) {
	return v.Engine.PolicyRevision(ctx)
}

// PolicyTrace implements server.PolicyExplainer.
func (v View) PolicyTrace(ctx context.Context, src, dst string, proto uint8, port uint16) (models.PolicyTrace, error) {
	res, err := v.Engine.Trace(ctx, policy.Peer(src), policy.Peer(dst), proto, port)
	if err != nil {
		return models.PolicyTrace{}, peerError(ctx, err)
	}
	return models.PolicyTrace{
		Source: peer(res.Source), Destination: peer(res.Destination),
		Egress: policyVerdict(res.Egress), Ingress: policyVerdict(res.Ingress), Allowed: res.Allowed,
	}, nil
}

// peerError tells the client's mistakes from the engine's. The engine
// fails a trace only for a peer it cannot resolve, its message starting
// with the side, or when ctx ends first.
func peerError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	msg := err.Error()
	for _, side := range []struct{ prefix, param string }{{"source: ", "src"}, {"destination: ", "dst"}} {
		if rest, ok := strings.CutPrefix(msg, side.prefix); ok {
			return &server.PeerError{Param: side.param, Err: errors.New(rest)}
		}
	}
	return &server.PeerError{Param: "src or dst", Err: err}
}

func peer(id policy.Identity) models.TracePeer {
	return models.TracePeer{Identity: id.ID, Labels: id.Labels.Strings()}
}

func policyVerdict(v policy.Verdict) models.PolicyVerdict {
	return models.PolicyVerdict{Allowed: v.Allowed, Enforced: v.Enforced, DecidedBy: origins(v.DecidedBy)}
}

func origin(o policy.Origin) models.PolicyOrigin {
	return models.PolicyOrigin{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
}

func origins(os []policy.Origin) []models.PolicyOrigin {
	out := make([]models.PolicyOrigin, 0, len(os))
	for _, o := range os {
		out = append(out, origin(o))
	}
	return out
}

func verdict(deny bool) string {
	if deny {
		return models.VerdictDeny
	}
	return models.VerdictAllow
}

// orEmpty makes nil an empty list, which JSON shows as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
