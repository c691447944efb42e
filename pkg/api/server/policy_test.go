package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

// fakePolicy answers as an engine with one rule and one endpoint (1),
// and records the traces it was asked.
type fakePolicy struct {
	err    error
	traces []string
}

var (
	webRule = models.PolicyRule{Origin: models.PolicyOrigin{Kind: "CiliumNetworkPolicy", Namespace: "prod", Name: "web"},
		Subject: `{"matchLabels":{"k8s:app":"web"}}`, Direction: "ingress", Verdict: "allow", DefaultDeny: true,
		Peers: []string{"entity:host"}, Ports: []string{"TCP/80"}}
	webPolicy = &models.EndpointPolicy{Identity: 4242, Revision: 3, Realized: 3, Ready: true, EnforceIngress: true,
		Entries: []models.PolicyEntry{{Direction: "ingress", Identity: 1, Protocol: 6, Port: 80, Verdict: "allow",
			Origins: []models.PolicyOrigin{webRule.Origin}}}}
)

func (f *fakePolicy) PolicyRules(context.Context) ([]models.PolicyRule, error) {
	return []models.PolicyRule{webRule}, f.err
}

func (f *fakePolicy) PolicyRevision(context.Context) (uint64, error) { return 3, f.err }

func (f *fakePolicy) PolicySelectors(context.Context) ([]models.PolicySelector, error) {
	return nil, f.err
}

func (f *fakePolicy) EndpointPolicy(_ context.Context, id uint16) (*models.EndpointPolicy, error) {
	if id != 1 {
		return nil, f.err
	}
	return webPolicy, f.err
}

func (f *fakePolicy) PolicyTrace(_ context.Context, src, dst string, proto uint8, port uint16) (models.PolicyTrace, error) {
	f.traces = append(f.traces, fmt.Sprintf("%s->%s %d/%d", src, dst, port, proto))
	if src == "prod/nosuch" {
		return models.PolicyTrace{}, &PeerError{Param: "src", Err: errors.New("pod prod/nosuch has no CiliumEndpoint")}
	}
	return models.PolicyTrace{Source: models.TracePeer{Identity: identity.Host, Labels: []string{"reserved:host"}},
		Destination: models.TracePeer{Identity: 4242, Labels: []string{"k8s:app=web"}},
		Egress:      models.PolicyVerdict{Allowed: true, DecidedBy: []models.PolicyOrigin{}},
		Ingress:     models.PolicyVerdict{Allowed: true, Enforced: true, DecidedBy: []models.PolicyOrigin{webRule.Origin}},
		Allowed:     true}, f.err
}

func TestPolicyRoutes(t *testing.T) {
	busy := fmt.Errorf("policy engine busy: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name   string
		policy *fakePolicy
		path   string
		code   int
		want   string
		traced string // what the engine was asked, if anything
	}{
		{"rules without engine", nil, "/v1/policy", 501, "without a policy engine", ""},
		{"selectors without engine", nil, "/v1/policy/selectors", 501, "without a policy engine", ""},
		{"trace without engine", nil, "/v1/policy/trace?src=1&dst=2&dport=80", 501, "without a policy engine", ""},
		// Cilium's shape: the rules as JSON text, and the revision.
		{"rules", &fakePolicy{}, "/v1/policy", 200, `\"origin\":{\"kind\":\"CiliumNetworkPolicy\",\"namespace\":\"prod\",\"name\":\"web\"},` +
			`\"subject\":\"{\\\"matchLabels\\\":{\\\"k8s:app\\\":\\\"web\\\"}}\",\"direction\":\"ingress\",\"verdict\":\"allow\",\"defaultDeny\":true,` +
			`\"peers\":[\"entity:host\"],\"ports\":[\"TCP/80\"]`, ""},
		{"revision", &fakePolicy{}, "/v1/policy", 200, `"revision":3}`, ""},
		{"no selectors is a list", &fakePolicy{}, "/v1/policy/selectors", 200, `[]`, ""},
		{"engine busy", &fakePolicy{err: busy}, "/v1/policy", 503, "policy engine busy", ""},
		{"trace", &fakePolicy{}, "/v1/policy/trace?src=1&dst=prod/web&dport=80", 200,
			`"protocol":"tcp","port":80,"egress":{"allowed":true,"enforced":false,"decidedBy":[]}`, "1->prod/web 80/6"},
		{"trace udp", &fakePolicy{}, "/v1/policy/trace?src=1&dst=2&dport=53&protocol=UDP", 200, `"protocol":"udp","port":53`,
			"1->2 53/17"},
		{"trace icmp type 0", &fakePolicy{}, "/v1/policy/trace?src=1&dst=2&dport=0&protocol=icmp", 200, `"port":0`, "1->2 0/1"},
		{"trace labels", &fakePolicy{}, "/v1/policy/trace?src=k8s:app%3Dweb+k8s:io.kubernetes.pod.namespace%3Dx&dst=2&dport=8080",
			200, `"allowed":true`, "k8s:app=web k8s:io.kubernetes.pod.namespace=x->2 8080/6"},
		{"unknown pod", &fakePolicy{}, "/v1/policy/trace?src=prod/nosuch&dst=2&dport=80", 400,
			"src: pod prod/nosuch has no CiliumEndpoint", "prod/nosuch->2 80/6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.policy != nil {
				f.s.p.Policy = tc.policy
			}
			var raw rawBody
			code := f.do(t, http.MethodGet, tc.path, "", &raw)
			if code != tc.code || !strings.Contains(string(raw), tc.want) {
				t.Fatalf("GET %s: %d %s, want %d with %s", tc.path, code, raw, tc.code, tc.want)
			}
			if tc.policy != nil && strings.Join(tc.policy.traces, ";") != tc.traced {
				t.Fatalf("engine asked %q, want %q", tc.policy.traces, tc.traced)
			}
		})
	}
}

// A bad trace query is refused whole, naming each bad parameter, before
// the engine is asked anything.
func TestPolicyTraceBadQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"src: required", "dst: required", "dport: required"}},
		{"src=1&dst=2", []string{"dport: required"}},
		{"src=1&dst=2&dport=http", []string{`dport: "http" is not a port from 1 to 65535`}},
		{"src=1&dst=2&dport=0", []string{`dport: "0" is not a port from 1 to 65535`}},
		{"src=1&dst=2&dport=65536", []string{`dport: "65536" is not a port`}},
		{"src=1&dst=2&dport=256&protocol=icmp", []string{`dport: "256" is not an ICMP type from 0 to 255`}},
		{"src=1&dst=2&dport=80&protocol=gre", []string{`protocol: "gre" is not tcp, udp, sctp or icmp`}},
		{"src=1&dst=2&dport=80&port=80", []string{"port: unknown parameter (known: src, dst, dport, protocol)"}},
		{"src=1&src=3&dst=2&dport=80", []string{"src: given 2 times"}},
		{"src=+&dst=2&dport=80", []string{"src: required"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			f := newFixture(t)
			p := &fakePolicy{}
			f.s.p.Policy = p
			var e models.Error
			if code := f.do(t, http.MethodGet, "/v1/policy/trace?"+tc.query, "", &e); code != 400 || e.Code != 400 {
				t.Fatalf("code %d %+v, want 400", code, e)
			}
			for _, w := range tc.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q lacks %q", e.Message, w)
				}
			}
			if len(p.traces) != 0 {
				t.Errorf("engine asked %q", p.traces)
			}
		})
	}
}

// GET /v1/endpoint/{id} holds the endpoint's policy when the engine
// knows it; the list never does.
func TestEndpointPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy PolicyExplainer
		code   int
		want   *models.EndpointPolicy
	}{
		{"without engine", nil, 200, nil},
		{"known", &fakePolicy{}, 200, webPolicy},
		{"engine busy", &fakePolicy{err: fmt.Errorf("busy: %w", context.DeadlineExceeded)}, 503, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.s.p.Policy = tc.policy
			var alloc models.IPAMResponse
			f.do(t, "POST", "/v1/ipam", `{"owner":"abc"}`, &alloc)
			if code := f.do(t, "PUT", "/v1/endpoint/container-id:abc", endpointBody("abc", alloc.Address), nil); code != 201 {
				t.Fatalf("PUT: %d", code)
			}
			var raw rawBody
			code := f.do(t, "GET", "/v1/endpoint/1", "", &raw)
			if code != tc.code {
				t.Fatalf("GET: %d %s, want %d", code, raw, tc.code)
			}
			var ep models.Endpoint
			if code == 200 {
				f.do(t, "GET", "/v1/endpoint/1", "", &ep)
			}
			if !reflect.DeepEqual(ep.Policy, tc.want) {
				t.Fatalf("policy %+v, want %+v", ep.Policy, tc.want)
			}
			var list []models.Endpoint
			f.do(t, "GET", "/v1/endpoint", "", &list)
			if len(list) != 1 || list[0].Policy != nil {
				t.Fatalf("list %+v", list)
			}
		})
	}
}

// FuzzTraceQuery: any query is refused as the client's or accepted
// whole, with both peers and a port the protocol has.
func FuzzTraceQuery(f *testing.F) {
	for _, q := range []string{"src=1&dst=2&dport=80", "src=a/b&dst=k8s:x%3Dy&dport=0&protocol=icmp", "dport=65536", "src=&src=1"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseTraceQuery(v)
		if err != nil {
			if statusOf(err) != http.StatusBadRequest {
				t.Fatalf("%q: %v is not the client's", raw, err)
			}
			return
		}
		if q.src == "" || q.dst == "" || models.TraceProtocols[q.protocol] != q.proto {
			t.Fatalf("%q accepted as %+v", raw, q)
		}
		if _, err := models.ParseTracePort(q.proto, strconv.Itoa(int(q.port))); err != nil {
			t.Fatalf("%q accepted with port %d: %v", raw, q.port, err)
		}
	})
}
