package k8s_test

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/l7"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

func makeCNP(tweaks ...func(*api.Rule)) *v2.CiliumNetworkPolicy {
	return &v2.CiliumNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "cnp"},
		Spec:       makeRule(tweaks...),
	}
}

func makeCCNP(tweaks ...func(*api.Rule)) *v2.CiliumClusterwideNetworkPolicy {
	return &v2.CiliumClusterwideNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ccnp"},
		Spec:       makeRule(tweaks...),
	}
}

// makeRule is a rule for app=web endpoints.
func makeRule(tweaks ...func(*api.Rule)) *api.Rule {
	r := &api.Rule{EndpointSelector: es("app", "web")}
	for _, f := range tweaks {
		f(r)
	}
	return r
}

func es(kv ...string) *api.EndpointSelector {
	s := &api.EndpointSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func ingress(rs ...api.IngressRule) func(*api.Rule) {
	return func(r *api.Rule) { r.Ingress = append(r.Ingress, rs...) }
}

func egress(rs ...api.EgressRule) func(*api.Rule) {
	return func(r *api.Rule) { r.Egress = append(r.Egress, rs...) }
}

func fromEndpoints(sels ...*api.EndpointSelector) api.IngressRule {
	r := api.IngressRule{}
	r.FromEndpoints = []api.EndpointSelector{}
	for _, s := range sels {
		r.FromEndpoints = append(r.FromEndpoints, *s)
	}
	return r
}

func fromEntities(ents ...api.Entity) api.IngressRule {
	r := api.IngressRule{}
	r.FromEntities = ents
	return r
}

func toPorts(pps ...api.PortProtocol) []api.PortRule {
	return []api.PortRule{{Ports: pps}}
}

func icmps(fields ...api.ICMPField) []api.ICMPRule {
	return []api.ICMPRule{{Fields: fields}}
}

func TestFromCNP(t *testing.T) {
	in := func(peers []string, ports ...policy.Port) ruleView {
		return ruleView{Dir: spec.Ingress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: peers, Ports: ports}
	}
	eg := func(peers []string, ports ...policy.Port) ruleView {
		v := in(peers, ports...)
		v.Dir = spec.Egress
		return v
	}
	withPorts := func(r api.IngressRule, prs []api.PortRule) api.IngressRule {
		r.ToPorts = prs
		return r
	}
	withL7 := func(v ruleView, rules *policy.L7Rules) ruleView {
		v.L7 = rules
		return v
	}
	no := false
	tests := []struct {
		name    string
		p       *v2.CiliumNetworkPolicy
		want    []ruleView
		wantErr []string
	}{{
		name: "endpoints in the policy's namespace",
		p:    makeCNP(ingress(fromEndpoints(es("app", "db"), es()))),
		want: []ruleView{in([]string{"x/db", "x/web"})},
	}, {
		name: "endpoints in a namespace named",
		p: makeCNP(ingress(fromEndpoints(
			es("k8s:io.kubernetes.pod.namespace", "y", "app", "web"),
			es("io.kubernetes.pod.namespace", "other")))),
		want: []ruleView{in([]string{"other/web", "y/web"})},
	}, {
		name: "endpoints in namespaces by their labels",
		p:    makeCNP(ingress(fromEndpoints(es("k8s:io.cilium.k8s.namespace.labels.team", "b")))),
		want: []ruleView{in([]string{"y/db", "y/web"})},
	}, {
		name: "reserved endpoints",
		p:    makeCNP(ingress(fromEndpoints(es("reserved:host", "")))),
		want: []ruleView{in([]string{"host"})},
	}, {
		name: "the subject stays in the policy's namespace",
		p: makeCNP(func(r *api.Rule) { r.EndpointSelector = es("k8s:io.kubernetes.pod.namespace", "y") },
			ingress(fromEndpoints(es("app", "db")))),
		want: []ruleView{{Dir: spec.Ingress, DefaultDeny: true, Subject: []string{"x/db", "x/web"}, Peers: []string{"x/db"}}},
	}, {
		name: "entities",
		p: makeCNP(ingress(
			fromEntities(api.EntityAll),
			fromEntities(api.EntityWorld, api.EntityWorldIPv4, api.EntityWorldIPv6),
			fromEntities(api.EntityCluster),
			fromEntities(api.EntityHost, api.EntityKubeAPIServer),
			fromEntities(api.EntityNone),
			fromEntities(api.EntityWorldIPv6))),
		want: []ruleView{
			in([]string{"*"}),
			in([]string{"cidr:10.0.2.7", "cidr:10.9.9.9", "cidr:8.8.8.8", "world", "world-ipv4"}),
			in([]string{"health", "host", "init", "kube-apiserver", "other/web", "remote-node", "x/db", "x/web", "y/db", "y/web"}),
			in([]string{"host", "kube-apiserver"}),
			in(nil),
			in(nil),
		},
	}, {
		name: "CIDRs do not match pods",
		p: makeCNP(egress(api.EgressRule{EgressCommonRule: api.EgressCommonRule{
			ToCIDR:    []api.CIDR{"8.8.8.0/24", "10.0.1.5"},
			ToCIDRSet: []api.CIDRRule{{Cidr: "10.0.0.0/8", ExceptCIDRs: []api.CIDR{"10.0.2.0/24"}}},
		}})),
		want: []ruleView{eg([]string{"cidr:10.9.9.9", "cidr:8.8.8.8"})},
	}, {
		name: "ports alone allow every peer",
		p: makeCNP(ingress(withPorts(api.IngressRule{}, []api.PortRule{
			{Ports: []api.PortProtocol{{Port: "0", Protocol: api.ProtoAny}, {Port: "0", Protocol: api.ProtoTCP}}},
			{Ports: []api.PortProtocol{{Port: "http"}, {Port: "8000", EndPort: 9000, Protocol: api.ProtoTCP}, {Port: "53", Protocol: api.ProtoUDP}}},
		}))),
		want: []ruleView{in([]string{"*"},
			policy.Port{AnyL4: true}, policy.Port{Protocol: spec.ProtoTCP},
			policy.Port{AnyL4: true, Name: "http"}, policy.Port{Protocol: spec.ProtoTCP, Port: 8000, EndPort: 9000},
			policy.Port{Protocol: spec.ProtoUDP, Port: 53})},
	}, {
		name: "ports of peers",
		p:    makeCNP(ingress(withPorts(fromEndpoints(es("app", "db")), toPorts(api.PortProtocol{Port: "5432", Protocol: api.ProtoSCTP})))),
		want: []ruleView{in([]string{"x/db"}, policy.Port{Protocol: spec.ProtoSCTP, Port: 5432})},
	}, {
		name: "ports without peers named allow nothing",
		p: makeCNP(ingress(
			withPorts(fromEndpoints(), toPorts(api.PortProtocol{Port: "80"})),
			api.IngressRule{ToPorts: []api.PortRule{{}}})),
		want: []ruleView{in(nil, policy.Port{AnyL4: true, Port: 80}), in(nil)},
	}, {
		name: "icmps",
		p: makeCNP(egress(api.EgressRule{ICMPs: icmps(
			api.ICMPField{Type: intstr.FromString("EchoRequest")}, api.ICMPField{Family: "IPv4", Type: intstr.FromString("3")},
			api.ICMPField{Family: "IPv6", Type: intstr.FromString("EchoRequest")})})),
		want: []ruleView{eg([]string{"*"}, policy.Port{Protocol: spec.ProtoICMP, Port: 8}, policy.Port{Protocol: spec.ProtoICMP, Port: 3})},
	}, {
		name: "only IPv6 icmps allow nothing",
		p:    makeCNP(egress(api.EgressRule{ICMPs: icmps(api.ICMPField{Family: "IPv6", Type: intstr.FromString("EchoRequest")})})),
		want: []ruleView{eg(nil)},
	}, {
		name: "deny rules isolate too",
		p: makeCNP(func(r *api.Rule) {
			r.IngressDeny = []api.IngressDenyRule{{IngressCommonRule: api.IngressCommonRule{FromEntities: []api.Entity{api.EntityWorld}}}}
			r.EgressDeny = []api.EgressDenyRule{{ToPorts: []api.PortDenyRule{{Ports: []api.PortProtocol{{Port: "25", Protocol: api.ProtoTCP}}}}}}
		}),
		want: []ruleView{
			{Dir: spec.Ingress, Deny: true, DefaultDeny: true, Subject: []string{"x/web"},
				Peers: []string{"cidr:10.0.2.7", "cidr:10.9.9.9", "cidr:8.8.8.8", "world", "world-ipv4"}},
			{Dir: spec.Egress, Deny: true, DefaultDeny: true, Subject: []string{"x/web"},
				Peers: []string{"*"}, Ports: []policy.Port{{Protocol: spec.ProtoTCP, Port: 25}}},
		},
	}, {
		name: "default deny disabled",
		p: makeCNP(ingress(fromEntities(api.EntityHost)), egress(api.EgressRule{}), func(r *api.Rule) {
			r.EnableDefaultDeny = &api.DefaultDenyConfig{Ingress: &no}
		}),
		want: []ruleView{
			{Dir: spec.Ingress, Subject: []string{"x/web"}, Peers: []string{"host"}},
			eg(nil),
		},
	}, {
		name: "an empty rule isolates and allows nothing",
		p:    makeCNP(ingress(api.IngressRule{})),
		want: []ruleView{in(nil)},
	}, {
		name: "an empty list has no rules",
		p:    makeCNP(func(r *api.Rule) { r.Ingress = []api.IngressRule{} }),
	}, {
		name: "an entry with http rules is a rule of its own",
		p: makeCNP(ingress(withPorts(fromEndpoints(es("app", "db")), []api.PortRule{
			{Ports: []api.PortProtocol{{Port: "80", Protocol: api.ProtoTCP}},
				Rules: &api.L7Rules{HTTP: []api.PortRuleHTTP{{Method: "GET", Path: "/public/.*"}, {Method: "POST", Path: "/v1/request-landing",
					HeaderMatches: []api.HeaderMatch{{Name: "X-Token", Value: "t", Mismatch: "LOG"}}}}}},
			{Ports: []api.PortProtocol{{Port: "8080", Protocol: api.ProtoTCP}}},
			{Ports: []api.PortProtocol{{Port: "8000", Protocol: api.ProtoTCP}, {Port: "http", Protocol: api.ProtoTCP}},
				Rules: &api.L7Rules{HTTP: []api.PortRuleHTTP{{}}}},
			{Ports: []api.PortProtocol{{Port: "53", Protocol: api.ProtoUDP}}, Rules: &api.L7Rules{HTTP: []api.PortRuleHTTP{}}},
		}))),
		want: []ruleView{
			in([]string{"x/db"}, policy.Port{Protocol: spec.ProtoTCP, Port: 8080}, policy.Port{Protocol: spec.ProtoUDP, Port: 53}),
			withL7(in([]string{"x/db"}, policy.Port{Protocol: spec.ProtoTCP, Port: 80}), &policy.L7Rules{Parser: policy.ParserHTTP,
				HTTP: []l7.HTTPRule{{Method: "GET", Path: "/public/.*"}, {Method: "POST", Path: "/v1/request-landing",
					HeaderMatches: []l7.HeaderMatch{{Name: "X-Token", Value: "t", Mismatch: l7.MismatchLog}}}}}),
			// An empty rule allows every request, seen by the proxy.
			withL7(in([]string{"x/db"}, policy.Port{Protocol: spec.ProtoTCP, Port: 8000}, policy.Port{Protocol: spec.ProtoTCP, Name: "http"}),
				&policy.L7Rules{Parser: policy.ParserHTTP, HTTP: []l7.HTTPRule{{}}}),
		},
	}, {
		name: "only entries with rules: no rule of every port",
		p: makeCNP(ingress(withPorts(api.IngressRule{}, []api.PortRule{{Ports: []api.PortProtocol{{Port: "80", Protocol: api.ProtoTCP}},
			Rules: &api.L7Rules{HTTP: []api.PortRuleHTTP{{Path: "/"}}}}}))),
		want: []ruleView{withL7(in([]string{"*"}, policy.Port{Protocol: spec.ProtoTCP, Port: 80}),
			&policy.L7Rules{Parser: policy.ParserHTTP, HTTP: []l7.HTTPRule{{Path: "/"}}})},
	}, {
		name: "dns rules and toFQDNs",
		p: makeCNP(egress(
			api.EgressRule{ToFQDNs: []api.FQDNSelector{{MatchName: "dns.google"}, {MatchPattern: "*.github.com"}},
				ToPorts: toPorts(api.PortProtocol{Port: "443", Protocol: api.ProtoTCP})},
			api.EgressRule{ToPorts: []api.PortRule{{Ports: []api.PortProtocol{{Port: "53", Protocol: api.ProtoAny}},
				Rules: &api.L7Rules{DNS: []api.PortRuleDNS{{MatchPattern: "*"}, {MatchName: "dns.google"}}}}}},
			api.EgressRule{ToFQDNs: []api.FQDNSelector{{MatchPattern: "**.google"}}},
			// Given empty, toFQDNs names no peers: the ports are
			// allowed to every peer, as in Cilium.
			api.EgressRule{ToFQDNs: []api.FQDNSelector{}, ToPorts: toPorts(api.PortProtocol{Port: "22", Protocol: api.ProtoTCP})})),
		want: []ruleView{
			eg([]string{"cidr:8.8.8.8"}, policy.Port{Protocol: spec.ProtoTCP, Port: 443}),
			withL7(eg([]string{"*"}, policy.Port{AnyL4: true, Port: 53}), &policy.L7Rules{Parser: policy.ParserDNS,
				DNS: []policy.DNSRule{{MatchPattern: "*"}, {MatchName: "dns.google"}}}),
			eg([]string{"cidr:8.8.8.8"}),
			eg([]string{"*"}, policy.Port{Protocol: spec.ProtoTCP, Port: 22}),
		},
	}, {
		name: "refused by validation",
		p: makeCNP(
			ingress(withPorts(api.IngressRule{}, []api.PortRule{{Ports: []api.PortProtocol{{Port: "9092", Protocol: api.ProtoTCP}},
				Rules: &api.L7Rules{Kafka: []json.RawMessage{json.RawMessage(`{"topic":"deathstar-plans"}`)}}}})),
			egress(api.EgressRule{ToFQDNs: []api.FQDNSelector{{MatchName: "example.com"}},
				EgressCommonRule: api.EgressCommonRule{ToEntities: []api.Entity{api.EntityWorld}}})),
		wantErr: []string{"spec.ingress[0].toPorts[0].rules.kafka", "spec.egress[0].toFQDNs"},
	}, {
		name: "refused",
		p: makeCNP(
			egress(
				api.EgressRule{},
				api.EgressRule{EgressCommonRule: api.EgressCommonRule{
					ToCIDR:    []api.CIDR{"2001:db8::/32"},
					ToCIDRSet: []api.CIDRRule{{CIDRGroupRef: "group"}},
					ToNodes:   []api.EndpointSelector{{}},
				}})),
		wantErr: []string{"spec.egress[1].toNodes"},
	}, {
		name: "bad ICMP types refused",
		p: makeCNP(egress(api.EgressRule{ICMPs: icmps(
			api.ICMPField{Type: intstr.FromString("Ping")}, api.ICMPField{Type: intstr.FromString("256")},
			api.ICMPField{Type: intstr.FromInt32(256)}, api.ICMPField{Type: intstr.FromInt32(-1)},
			api.ICMPField{Family: "IPv6", Type: intstr.FromString("Redirect")})})),
		wantErr: []string{
			"spec.egress[0].icmps[0].fields[0].type", "spec.egress[0].icmps[0].fields[1].type",
			"spec.egress[0].icmps[0].fields[2].type", "spec.egress[0].icmps[0].fields[3].type",
			"spec.egress[0].icmps[0].fields[4].type",
		},
	}, {
		name: "refused in specs",
		p: func() *v2.CiliumNetworkPolicy {
			p := makeCNP()
			p.Specs = api.Rules{makeRule(), makeRule(ingress(api.IngressRule{IngressCommonRule: api.IngressCommonRule{
				FromCIDRSet: []api.CIDRRule{{Cidr: "fd00::/8", ExceptCIDRs: []api.CIDR{"10.0.0.0/8"}}},
			}}))}
			return p
		}(),
		wantErr: []string{"specs[1].ingress[0].fromCIDRSet[0].except[0]"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromCNP(tt.p, withProxy)
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr)
				if rules != nil {
					t.Errorf("rules %v with an error", rules)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "cnp"}, tt.want)
		})
	}
}

func TestFromCCNP(t *testing.T) {
	web := []string{"other/web", "x/web", "y/web"}
	tests := []struct {
		name    string
		p       *v2.CiliumClusterwideNetworkPolicy
		want    []ruleView
		wantErr []string
	}{{
		name: "not scoped to a namespace",
		p:    makeCCNP(ingress(fromEndpoints(es("app", "db"), es("reserved:health", "")))),
		want: []ruleView{{Dir: spec.Ingress, DefaultDeny: true, Subject: web, Peers: []string{"health", "x/db", "y/db"}}},
	}, {
		name: "an empty endpoint selector selects pods",
		p:    makeCCNP(egress(api.EgressRule{EgressCommonRule: api.EgressCommonRule{ToEndpoints: []api.EndpointSelector{{}}}})),
		want: []ruleView{{Dir: spec.Egress, DefaultDeny: true, Subject: web, Peers: []string{"other/web", "x/db", "x/web", "y/db", "y/web"}}},
	}, {
		name: "namespace named",
		p:    makeCCNP(ingress(fromEndpoints(es("k8s:io.kubernetes.pod.namespace", "y")))),
		want: []ruleView{{Dir: spec.Ingress, DefaultDeny: true, Subject: web, Peers: []string{"y/db", "y/web"}}},
	}, {
		name: "host policies refused",
		p: makeCCNP(ingress(api.IngressRule{}), func(r *api.Rule) {
			r.EndpointSelector, r.NodeSelector = nil, es()
		}),
		wantErr: []string{"spec.nodeSelector"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromCCNP(tt.p, policyk8s.Cluster{})
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, policy.Origin{Kind: policy.KindCCNP, Name: "ccnp"}, tt.want)
		})
	}
}

// FromCiliumRules checks the rules itself, naming them by the paths given
// or by their index.
func TestFromCiliumRulesStandalone(t *testing.T) {
	origin := policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "direct"}
	rules := api.Rules{
		makeRule(ingress(api.IngressRule{IngressCommonRule: api.IngressCommonRule{FromCIDR: []api.CIDR{"10.0.0.0/33"}}})),
		nil,
	}
	_, err := policyk8s.FromCiliumRules(origin, "x", rules, nil, policyk8s.Cluster{})
	checkErr(t, err, []string{"specs[0].ingress[0].fromCIDR[0]", "specs[1]"})

	_, err = policyk8s.FromCiliumRules(origin, "x", rules[:1], []*field.Path{field.NewPath("spec")}, policyk8s.Cluster{})
	checkErr(t, err, []string{"spec.ingress[0].fromCIDR[0]"})

	// Validate refuses Kafka rules: the field is named once.
	kafka := makeRule(ingress(api.IngressRule{ToPorts: []api.PortRule{{Ports: []api.PortProtocol{{Port: "9092"}},
		Rules: &api.L7Rules{Kafka: []json.RawMessage{json.RawMessage(`{}`)}}}}}))
	_, err = policyk8s.FromCiliumRules(origin, "x", api.Rules{kafka}, nil, policyk8s.Cluster{})
	checkErr(t, err, []string{"specs[0].ingress[0].toPorts[0].rules.kafka"})
	if n := strings.Count(err.Error(), "toPorts[0].rules"); n != 1 {
		t.Errorf("error %q names the field %d times", err, n)
	}

	got, err := policyk8s.FromCiliumRules(origin, "x", api.Rules{makeRule(ingress(fromEntities(api.EntityHost)))}, nil, policyk8s.Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, got, origin, []ruleView{{Dir: spec.Ingress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"host"}}})
}

// An update that changes only layer-7 rules or FQDN names changes the
// rules: the agent must not take it for the policy it has.
func TestL7UpdatesAreChanges(t *testing.T) {
	cnp := func(path, name string) []policy.Rule {
		t.Helper()
		rules, err := policyk8s.FromCNP(makeCNP(egress(api.EgressRule{
			ToFQDNs: []api.FQDNSelector{{MatchName: name}},
			ToPorts: []api.PortRule{{Ports: []api.PortProtocol{{Port: "80", Protocol: api.ProtoTCP}},
				Rules: &api.L7Rules{HTTP: []api.PortRuleHTTP{{Path: path}}}}},
		})), withProxy)
		if err != nil {
			t.Fatal(err)
		}
		return rules
	}
	if !policy.SameRules(cnp("/a", "a.com"), cnp("/a", "a.com")) {
		t.Error("the same policy translated twice differs")
	}
	if policy.SameRules(cnp("/a", "a.com"), cnp("/b", "a.com")) {
		t.Error("another path is the same rules")
	}
	if policy.SameRules(cnp("/a", "a.com"), cnp("/a", "b.com")) {
		t.Error("another name is the same rules")
	}
}

// withProxy is a node that runs the layer-7 proxy.
var withProxy = policyk8s.Cluster{L7Proxy: true}

// A node without the layer-7 proxy refuses layer-7 rules and toFQDNs,
// naming each field: their allows could only allow all or nothing.
func TestL7NeedsTheProxy(t *testing.T) {
	http := []api.PortRule{{Ports: []api.PortProtocol{{Port: "80", Protocol: api.ProtoTCP}},
		Rules: &api.L7Rules{HTTP: []api.PortRuleHTTP{{Path: "/"}}}}}
	p := makeCNP(ingress(api.IngressRule{ToPorts: http}), egress(api.EgressRule{ToPorts: http},
		api.EgressRule{ToFQDNs: []api.FQDNSelector{{MatchName: "cilium.io"}}}))
	_, err := policyk8s.FromCNP(p, policyk8s.Cluster{})
	checkErr(t, err, []string{"spec.ingress[0].toPorts[0].rules", "spec.egress[0].toPorts[0].rules", "spec.egress[1].toFQDNs"})
	if _, err := policyk8s.FromCNP(p, withProxy); err != nil {
		t.Fatal(err)
	}
}
