package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/api/server"
	"github.com/cilium-go/cilium/pkg/identity"
)

var (
	dbFromWeb = models.PolicyOrigin{Kind: "CiliumNetworkPolicy", Namespace: "prod", Name: "db-from-web"}
	denyDNS   = models.PolicyOrigin{Kind: "CiliumClusterwideNetworkPolicy", Name: "deny-dns"}
	allowAll  = models.PolicyOrigin{Kind: "builtin", Name: "allow-all"}
)

// fakePolicy is an engine with a rule letting prod/web (4242) reach
// prod/db (4343) on 5432/tcp, and a cluster-wide deny of DNS.
type fakePolicy struct{}

func (fakePolicy) PolicyRules(context.Context) ([]models.PolicyRule, error) {
	return []models.PolicyRule{
		{Origin: denyDNS, Subject: "*", Direction: "egress", Verdict: "deny", Peers: []string{"entity:world"},
			Ports: []string{"UDP/53"}},
		{Origin: dbFromWeb, Subject: `ns=prod:{"matchLabels":{"k8s:app":"db"}}`, Direction: "ingress", Verdict: "allow",
			DefaultDeny: true, Peers: []string{`ns=prod:{"matchLabels":{"k8s:app":"web"}}`}, Ports: []string{"TCP/5432"}},
		{Origin: models.PolicyOrigin{Kind: "NetworkPolicy", Namespace: "prod", Name: "isolate"}, Subject: "ns=prod:{}",
			Direction: "egress", Verdict: "allow", DefaultDeny: true, Peers: []string{}, Ports: []string{}},
	}, nil
}

func (fakePolicy) PolicyRevision(context.Context) (uint64, error) { return 7, nil }

func (fakePolicy) PolicySelectors(context.Context) ([]models.PolicySelector, error) {
	return []models.PolicySelector{
		{Selector: "entity:world", Identities: []identity.NumericIdentity{identity.World}, Users: 2},
		{Selector: `ns=prod:{"matchLabels":{"k8s:app":"web"}}`, Identities: []identity.NumericIdentity{4242, 4244}, Users: 1},
		{Selector: `ns=prod:{"matchLabels":{"k8s:app":"cache"}}`, Identities: []identity.NumericIdentity{}, Users: 1},
	}, nil
}

func (fakePolicy) EndpointPolicy(_ context.Context, id uint16) (*models.EndpointPolicy, error) {
	if id != 2 {
		return nil, nil
	}
	return &models.EndpointPolicy{Identity: 4343, Revision: 7, Realized: 6, PolicyRevision: 3, Ready: true, EnforceIngress: true,
		Error: "update policy map: map full",
		Entries: []models.PolicyEntry{
			{Direction: "ingress", Identity: 4242, Protocol: spec.ProtoTCP, Port: 5432, Verdict: "allow",
				Origins: []models.PolicyOrigin{dbFromWeb}},
			{Direction: "ingress", Identity: 4244, Protocol: spec.ProtoTCP, Port: 8000, EndPort: 8080, Verdict: "allow",
				Origins: []models.PolicyOrigin{dbFromWeb}},
			{Direction: "egress", Identity: identity.World, Protocol: spec.ProtoUDP, Port: 53, Verdict: "deny",
				Origins: []models.PolicyOrigin{denyDNS}},
			{Direction: "egress", Verdict: "allow", Origins: []models.PolicyOrigin{allowAll}},
		}}, nil
}

func (fakePolicy) PolicyTrace(_ context.Context, src, dst string, proto uint8, port uint16) (models.PolicyTrace, error) {
	peers := map[string]models.TracePeer{
		"prod/web": {Identity: 4242, Labels: []string{"k8s:app=web", "k8s:io.kubernetes.pod.namespace=prod"}},
		"prod/db":  {Identity: 4343, Labels: []string{"k8s:app=db", "k8s:io.kubernetes.pod.namespace=prod"}},
		"2":        {Identity: identity.World, Labels: []string{"reserved:world"}},
		"k8s:app=new k8s:io.kubernetes.pod.namespace=prod": {Labels: []string{"k8s:app=new", "k8s:io.kubernetes.pod.namespace=prod"}},
	}
	s, ok := peers[src]
	if !ok {
		return models.PolicyTrace{}, &server.PeerError{Param: "src", Err: errors.New("pod " + src + " has no CiliumEndpoint")}
	}
	d, ok := peers[dst]
	if !ok {
		return models.PolicyTrace{}, &server.PeerError{Param: "dst", Err: errors.New("pod " + dst + " has no CiliumEndpoint")}
	}
	tr := models.PolicyTrace{Source: s, Destination: d,
		Egress:  models.PolicyVerdict{Allowed: true, DecidedBy: []models.PolicyOrigin{allowAll}},
		Ingress: models.PolicyVerdict{Enforced: true, DecidedBy: []models.PolicyOrigin{}}}
	switch {
	case proto == spec.ProtoUDP && port == 53:
		tr.Egress = models.PolicyVerdict{DecidedBy: []models.PolicyOrigin{denyDNS}}
	case proto == spec.ProtoTCP && port == 5432 && s.Identity == 4242:
		tr.Ingress = models.PolicyVerdict{Allowed: true, Enforced: true, DecidedBy: []models.PolicyOrigin{dbFromWeb}}
	}
	tr.Allowed = tr.Egress.Allowed && tr.Ingress.Allowed
	return tr, nil
}

func TestPolicyTables(t *testing.T) {
	a := startAgent(t, agentOptions{policy: fakePolicy{}})
	for _, tc := range []struct {
		args []string
		want [][]string // rows of fields, exactly
	}{
		{[]string{"policy", "get"}, [][]string{
			{"Revision:", "7"},
			{"ORIGIN", "SUBJECT", "DIRECTION", "VERDICT", "ISOLATES", "PEERS", "PORTS"},
			{"CiliumClusterwideNetworkPolicy/deny-dns", "*", "egress", "deny", "no", "entity:world", "UDP/53"},
			{"CiliumNetworkPolicy/prod/db-from-web", `ns=prod:{"matchLabels":{"k8s:app":"db"}}`, "ingress", "allow", "yes",
				`ns=prod:{"matchLabels":{"k8s:app":"web"}}`, "TCP/5432"},
			{"NetworkPolicy/prod/isolate", "ns=prod:{}", "egress", "allow", "yes", "-", "any"},
		}},
		{[]string{"policy", "selectors"}, [][]string{
			{"SELECTOR", "USERS", "IDENTITIES"},
			{"entity:world", "2", "2"},
			{`ns=prod:{"matchLabels":{"k8s:app":"web"}}`, "1", "4242,4244"},
			{`ns=prod:{"matchLabels":{"k8s:app":"cache"}}`, "1", "-"},
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := run(t, a.socket, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := lines(out); !equalRows(got, tc.want) {
				t.Fatalf("got\n%s\nwant rows %q", out, tc.want)
			}
		})
	}
}

func TestPolicyTrace(t *testing.T) {
	a := startAgent(t, agentOptions{policy: fakePolicy{}})
	for _, tc := range []struct {
		name string
		args []string
		want []string // the output's lines, exactly
	}{
		{"allowed", []string{"--src", "prod/web", "--dst", "prod/db", "--dport", "5432"}, []string{
			"Source:               identity 4242 (k8s:app=web k8s:io.kubernetes.pod.namespace=prod)",
			"Destination:          identity 4343 (k8s:app=db k8s:io.kubernetes.pod.namespace=prod)",
			"Destination port:     5432/tcp",
			"Source egress:        allowed (not enforced): allowed by builtin/allow-all",
			"Destination ingress:  allowed (enforced): allowed by CiliumNetworkPolicy/prod/db-from-web",
			"",
			"Final verdict: ALLOWED",
		}},
		{"denied by default", []string{"--src", "prod/web", "--dst", "prod/db", "--dport", "80/TCP"}, []string{
			"Source:               identity 4242 (k8s:app=web k8s:io.kubernetes.pod.namespace=prod)",
			"Destination:          identity 4343 (k8s:app=db k8s:io.kubernetes.pod.namespace=prod)",
			"Destination port:     80/tcp",
			"Source egress:        allowed (not enforced): allowed by builtin/allow-all",
			"Destination ingress:  denied (enforced): denied by default: no rule allows it",
			"",
			"Final verdict: DENIED",
		}},
		{"denied by a rule, labels without identity", []string{"--src", "k8s:app=new k8s:io.kubernetes.pod.namespace=prod",
			"--dst", "2", "--dport", "53/udp"}, []string{
			"Source:               no identity yet (k8s:app=new k8s:io.kubernetes.pod.namespace=prod)",
			"Destination:          identity 2 (reserved:world)",
			"Destination port:     53/udp",
			"Source egress:        denied (not enforced): denied by CiliumClusterwideNetworkPolicy/deny-dns",
			"Destination ingress:  denied (enforced): denied by default: no rule allows it",
			"",
			"Final verdict: DENIED",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, a.socket, append([]string{"policy", "trace"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", out, strings.Join(tc.want, "\n"))
			}
		})
	}
	var tr models.PolicyTrace
	decode(t, a.socket, &tr, "policy", "trace", "--src", "prod/web", "--dst", "prod/db", "--dport", "5432/tcp")
	if !tr.Allowed || tr.Protocol != "tcp" || tr.Port != 5432 || tr.Ingress.DecidedBy[0] != dbFromWeb || tr.Source.Identity != 4242 {
		t.Errorf("trace json: %+v", tr)
	}
}

func TestEndpointGetPolicy(t *testing.T) {
	a := startAgent(t, agentOptions{policy: fakePolicy{}})
	out, err := run(t, a.socket, "endpoint", "get", "2")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Policy revision:  7",
		"Policy realized:  6",
		"Policy enforced:  ingress",
		"Policy error:     update policy map: map full",
		"",
		"DIRECTION  IDENTITY  PROTOCOL  PORT       VERDICT  ORIGINS",
		"ingress    4242      tcp       5432       allow    CiliumNetworkPolicy/prod/db-from-web",
		"ingress    4244      tcp       8000-8080  allow    CiliumNetworkPolicy/prod/db-from-web",
		"egress     2         udp       53         deny     CiliumClusterwideNetworkPolicy/deny-dns",
		"egress     any       any       any        allow    builtin/allow-all",
	}, "\n") + "\n"
	if !strings.HasSuffix(out, want) || !strings.Contains(out, "ID:               2\n") {
		t.Fatalf("got\n%s\nwant it to end with\n%s", out, want)
	}
	// Endpoint 1 is not known to the engine yet.
	if out, err := run(t, a.socket, "endpoint", "get", "1"); err != nil || !strings.HasSuffix(out, "Policy:          not known to the policy engine\n") {
		t.Fatalf("endpoint 1: %v\n%s", err, out)
	}
	var ep []*cm.Endpoint
	ciliumDecode(t, a.socket, &ep, "endpoint", "get", "2")
	if p := ep[0].Status.Policy; p == nil || p.Spec.Build != 7 || p.Realized.PolicyRevision != 3 ||
		p.Spec.PolicyEnabled != cm.EndpointPolicyEnabledIngress || !slices.Equal(p.Spec.AllowedEgressIdentities, []int64{0}) {
		t.Fatalf("endpoint get json: %+v", ep[0].Status.Policy)
	}
	// The list has the policies too; endpoint 1's is not known yet.
	var eps []*cm.Endpoint
	ciliumDecode(t, a.socket, &eps, "endpoint", "list")
	if len(eps) != 2 || eps[0].Status.Policy != nil || eps[1].Status.Policy.Realized.PolicyRevision != 3 {
		t.Fatalf("endpoint list: %+v", eps)
	}
	// As cilium-cli asks for the policy revision.
	if out, err := run(t, a.socket, "policy", "get", "-o", "jsonpath='{.revision}'"); err != nil || out != "'7'\n" {
		t.Fatalf("policy revision: %q %v", out, err)
	}
	var pol cm.Policy
	ciliumDecode(t, a.socket, &pol, "policy", "get")
	if pol.Revision != 7 || !strings.Contains(pol.Policy, `"origin":{"kind":"NetworkPolicy","namespace":"prod","name":"isolate"}`) {
		t.Fatalf("policy get json: %+v", pol)
	}
}

func TestPolicyErrors(t *testing.T) {
	a := startAgent(t, agentOptions{policy: fakePolicy{}})
	none := startAgent(t, agentOptions{})
	trace := func(args ...string) []string { return append([]string{"policy", "trace"}, args...) }
	for _, tc := range []struct {
		socket string
		args   []string
		want   string
	}{
		{none.socket, []string{"policy", "get"}, "501: policy: the agent runs without a policy engine"},
		{none.socket, []string{"policy", "selectors"}, "501: policy: the agent runs without a policy engine"},
		{none.socket, trace("--src", "1", "--dst", "2", "--dport", "80"), "501: policy: the agent runs without a policy engine"},
		{a.socket, trace("--src", "prod/nosuch", "--dst", "prod/db", "--dport", "80"),
			`policy trace --src "prod/nosuch" --dst "prod/db": 400: src: pod prod/nosuch has no CiliumEndpoint`},
		{a.socket, trace("--src", "prod/web", "--dst", "prod/gone", "--dport", "80"),
			`400: dst: pod prod/gone has no CiliumEndpoint`},
		{a.socket, trace("--src", "1", "--dst", "2", "--dport", "http"), `--dport "http": port: "http" is not a port from 1 to 65535`},
		{a.socket, trace("--src", "1", "--dst", "2", "--dport", "70000/udp"), `--dport "70000/udp": port: "70000" is not a port`},
		{a.socket, trace("--src", "1", "--dst", "2", "--dport", "300/icmp"), `is not an ICMP type from 0 to 255`},
		{a.socket, trace("--src", "1", "--dst", "2", "--dport", "80/gre"), `--dport "80/gre": protocol "gre" is not tcp, udp, sctp or icmp`},
		{a.socket, trace("--src", "1", "--dport", "80"), `required flag(s) "dst" not set`},
		{a.socket, trace("--src", " ", "--dst", "2", "--dport", "80"), `400: bad request: src: required`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := run(t, tc.socket, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Fatalf("output on error: %q", out)
			}
		})
	}
}
