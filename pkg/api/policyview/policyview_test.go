package policyview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	policyagent "github.com/cilium-go/cilium/pkg/policy/agent"
)

var (
	cnp     = policy.Origin{Kind: policy.KindCNP, Namespace: "prod", Name: "web"}
	builtin = policy.Origin{Kind: policy.KindBuiltin, Name: "allow-all"}
)

// fakeEngine answers as the engine does: endpoint 1 is known, and the
// trace's peers resolve unless they are "prod/nosuch" or "nobody".
type fakeEngine struct{}

func (fakeEngine) Rules(context.Context) ([]policy.RuleInfo, error) {
	return []policy.RuleInfo{
		{Origin: cnp, Subject: "sel", Direction: spec.Ingress, DefaultDeny: true, Peers: []string{"entity:host"}},
		{Origin: cnp, Subject: "sel", Direction: spec.Egress, Deny: true, Ports: []string{"UDP/53"}},
	}, nil
}

func (fakeEngine) PolicyRevision(context.Context) (uint64, error) { return 1, nil }

func (fakeEngine) Selectors(context.Context) ([]policy.SelectorInfo, error) {
	return []policy.SelectorInfo{{Selector: "entity:host", Identities: []identity.NumericIdentity{1}, Users: 2}, {Selector: "none"}}, nil
}

func (fakeEngine) EndpointPolicy(_ context.Context, id uint16) (policyagent.EndpointPolicyInfo, error) {
	if id != 1 {
		return policyagent.EndpointPolicyInfo{}, fmt.Errorf("endpoint %d: %w", id, policyagent.ErrNoEndpoint)
	}
	return policyagent.EndpointPolicyInfo{
		EndpointStatus: policy.EndpointStatus{ID: 1, Identity: 4242, Revision: 5, Ready: true, EnforceIngress: true},
		Error:          "update policy map: map full",
		Entries: map[spec.PolicyEntry][]policy.Origin{
			{Direction: spec.Egress}: {builtin},
			{Direction: spec.Ingress, Identity: 1, Protocol: spec.ProtoTCP, Port: 80, EndPort: 90}: {cnp},
			{Direction: spec.Ingress, Identity: 1}:                                                 {builtin, cnp},
		},
	}, nil
}

func (fakeEngine) Trace(ctx context.Context, src, dst policy.Peer, _ uint8, _ uint16) (policy.TraceResult, error) {
	if err := ctx.Err(); err != nil {
		return policy.TraceResult{}, fmt.Errorf("policy engine busy: %w", err)
	}
	switch {
	case src == "prod/nosuch":
		return policy.TraceResult{}, errors.New("source: pod prod/nosuch has no CiliumEndpoint")
	case dst == "nobody":
		return policy.TraceResult{}, errors.New("destination: identity 99 is not known")
	}
	return policy.TraceResult{
		Source:      policy.Identity{ID: identity.Host, Labels: labels.FromStrings("reserved:host")},
		Destination: policy.Identity{Labels: labels.FromStrings("k8s:app=web", "k8s:io.kubernetes.pod.namespace=x")},
		Egress:      policy.Verdict{Allowed: true, DecidedBy: []policy.Origin{builtin}},
		Ingress:     policy.Verdict{Enforced: true},
	}, nil
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestView(t *testing.T) {
	v := View{Engine: fakeEngine{}}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		get  func() (any, error)
		want string
	}{
		{"rules", func() (any, error) { return v.PolicyRules(ctx) },
			`[{"origin":{"kind":"CiliumNetworkPolicy","namespace":"prod","name":"web"},"subject":"sel","direction":"ingress",` +
				`"verdict":"allow","defaultDeny":true,"peers":["entity:host"],"ports":[]},` +
				`{"origin":{"kind":"CiliumNetworkPolicy","namespace":"prod","name":"web"},"subject":"sel","direction":"egress",` +
				`"verdict":"deny","defaultDeny":false,"peers":[],"ports":["UDP/53"]}]`},
		{"selectors", func() (any, error) { return v.PolicySelectors(ctx) },
			`[{"selector":"entity:host","identities":[1],"users":2},{"selector":"none","identities":[],"users":0}]`},
		{"endpoint policy, entries sorted", func() (any, error) { return v.EndpointPolicy(ctx, 1) },
			`{"identity":4242,"revision":5,"realized":0,"policyRevision":0,"ready":true,"enforceIngress":true,"enforceEgress":false,` +
				`"error":"update policy map: map full","entries":[` +
				`{"direction":"ingress","identity":1,"protocol":0,"port":0,"verdict":"allow","origins":[` +
				`{"kind":"builtin","name":"allow-all"},{"kind":"CiliumNetworkPolicy","namespace":"prod","name":"web"}]},` +
				`{"direction":"ingress","identity":1,"protocol":6,"port":80,"endPort":90,"verdict":"allow","origins":[` +
				`{"kind":"CiliumNetworkPolicy","namespace":"prod","name":"web"}]},` +
				`{"direction":"egress","identity":0,"protocol":0,"port":0,"verdict":"allow","origins":[{"kind":"builtin","name":"allow-all"}]}]}`},
		{"endpoint unknown to the engine", func() (any, error) { return v.EndpointPolicy(ctx, 2) }, `null`},
		{"trace", func() (any, error) { return v.PolicyTrace(ctx, "1", "k8s:app=web", spec.ProtoTCP, 80) },
			`{"source":{"identity":1,"labels":["reserved:host"]},` +
				`"destination":{"identity":0,"labels":["k8s:app=web","k8s:io.kubernetes.pod.namespace=x"]},"protocol":"","port":0,` +
				`"egress":{"allowed":true,"enforced":false,"decidedBy":[{"kind":"builtin","name":"allow-all"}]},` +
				`"ingress":{"allowed":false,"enforced":true,"decidedBy":[]},"allowed":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.get()
			if err != nil {
				t.Fatal(err)
			}
			if s := asJSON(t, got); s != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", s, tc.want)
			}
		})
	}
}

// The engine's peer errors become the client's, naming the parameter;
// an engine that did not answer in time is not the client's fault.
func TestTraceErrors(t *testing.T) {
	v := View{Engine: fakeEngine{}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		src, dst string
		param    string // of the *server.PeerError, "" for none
		want     string
	}{
		{"unknown pod", context.Background(), "prod/nosuch", "2", "src", "src: pod prod/nosuch has no CiliumEndpoint"},
		{"unknown identity", context.Background(), "1", "nobody", "dst", "dst: identity 99 is not known"},
		{"engine gone", cancelled, "1", "2", "", "policy engine busy: context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.PolicyTrace(tc.ctx, tc.src, tc.dst, spec.ProtoTCP, 80)
			var pe *server.PeerError
			isPeer := errors.As(err, &pe)
			if err == nil || err.Error() != tc.want || isPeer != (tc.param != "") || (isPeer && pe.Param != tc.param) {
				t.Fatalf("error %v (peer error %v), want %q with param %q", err, isPeer, tc.want, tc.param)
			}
		})
	}
}
