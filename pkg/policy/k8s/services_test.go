package k8s_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// fakeServices holds Services and EndpointSlices as the agent's caches
// do.
type fakeServices struct {
	svcs   []*corev1.Service
	slices []*discoveryv1.EndpointSlice
}

func (f *fakeServices) KubeService(namespace, name string) (*corev1.Service, bool) {
	for _, s := range f.svcs {
		if s.Namespace == namespace && s.Name == name {
			return s, true
		}
	}
	return nil, false
}

func (f *fakeServices) KubeServices(namespace string) []*corev1.Service {
	var out []*corev1.Service
	for _, s := range f.svcs {
		if namespace == "" || s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeServices) EndpointSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, es := range f.slices {
		if es.Namespace == namespace && es.Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, es)
		}
	}
	return out
}

func makeService(ns, name string, tweaks ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, f := range tweaks {
		f(s)
	}
	return s
}

func withSelector(kv ...string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Selector = pairs(kv) }
}

func withLabels(kv ...string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Labels = pairs(kv) }
}

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// makeSlice is an EndpointSlice of the Service ns/svc with endpoints.
func makeSlice(ns, svc string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
}

// endpoint is an endpoint of addr; ready and serving nil count as true.
func endpoint(addr string, ready, serving *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving}}
}

func toServices(refs ...api.Service) api.EgressRule {
	r := api.EgressRule{}
	r.ToServices = refs
	return r
}

func byName(name, ns string) api.Service {
	return api.Service{K8sService: &api.K8sServiceNamespace{ServiceName: name, Namespace: ns}}
}

func bySelector(sel *api.EndpointSelector, ns string) api.Service {
	return api.Service{K8sServiceSelector: &api.K8sServiceSelectorNamespace{Selector: *sel, Namespace: ns}}
}

// cluster has Services with selectors in x and y, and without one in x
// (ext: its slice lists the world's addresses, one of them gone).
var cluster = &fakeServices{
	svcs: []*corev1.Service{
		makeService("x", "db", withSelector("app", "db"), withLabels("tier", "backend")),
		makeService("y", "db", withSelector("app", "db"), withLabels("tier", "backend")),
		makeService("y", "web", withSelector("app", "web"), withLabels("tier", "front")),
		makeService("x", "ext", withLabels("tier", "backend")),
	},
	slices: []*discoveryv1.EndpointSlice{
		makeSlice("x", "db", endpoint("10.0.1.5", nil, nil)),
		makeSlice("x", "ext",
			endpoint("10.9.9.9", nil, nil),
			endpoint("8.8.8.8", new(false), new(true)), // terminating, still serving
			endpoint("10.0.2.7", new(false), new(false))),
	},
}

func TestToServices(t *testing.T) {
	eg := func(peers []string, ports ...policy.Port) ruleView {
		return ruleView{Dir: spec.Egress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: peers, Ports: ports}
	}
	withPorts := func(r api.EgressRule) api.EgressRule {
		r.ToPorts = toPorts(api.PortProtocol{Port: "5432", Protocol: api.ProtoTCP})
		return r
	}
	tests := []struct {
		name string
		p    *v2.CiliumNetworkPolicy
		want []ruleView
	}{{
		name: "a Service with a selector: its pods",
		p:    makeCNP(egress(toServices(byName("db", "x")))),
		want: []ruleView{eg([]string{"x/db"})},
	}, {
		name: "no namespace: the Services of that name in every namespace, as in Cilium",
		p:    makeCNP(egress(toServices(byName("db", "")))),
		want: []ruleView{eg([]string{"x/db", "y/db"})},
	}, {
		name: "a Service without a selector: its endpoints' addresses that serve, as CIDRs",
		p:    makeCNP(egress(toServices(byName("ext", "x")))),
		want: []ruleView{eg([]string{"cidr:10.9.9.9", "cidr:8.8.8.8"})},
	}, {
		name: "a Service that does not exist allows nothing and isolates",
		p:    makeCNP(egress(toServices(byName("nope", "")), withPorts(toServices(byName("nope", ""))))),
		want: []ruleView{eg(nil), eg(nil, policy.Port{Protocol: spec.ProtoTCP, Port: 5432})},
	}, {
		name: "ports of a Service's pods",
		p:    makeCNP(egress(withPorts(toServices(byName("db", "x"))))),
		want: []ruleView{eg([]string{"x/db"}, policy.Port{Protocol: spec.ProtoTCP, Port: 5432})},
	}, {
		name: "a namespace named",
		p:    makeCNP(egress(toServices(byName("db", "y"), byName("web", "y")))),
		want: []ruleView{eg([]string{"y/db", "y/web"})},
	}, {
		name: "a selector without a namespace reads the labels of every namespace's Services",
		p:    makeCNP(egress(toServices(bySelector(es("tier", "backend"), "")))),
		want: []ruleView{eg([]string{"cidr:10.9.9.9", "cidr:8.8.8.8", "x/db", "y/db"})},
	}, {
		name: "a selector in a namespace named",
		p:    makeCNP(egress(toServices(bySelector(es(), "y")))),
		want: []ruleView{eg([]string{"y/db", "y/web"})},
	}, {
		name: "egress deny",
		p: makeCNP(func(r *api.Rule) {
			r.EgressDeny = []api.EgressDenyRule{{EgressCommonRule: toServices(byName("db", "x")).EgressCommonRule}}
		}),
		want: []ruleView{{Dir: spec.Egress, Deny: true, DefaultDeny: true, Subject: []string{"x/web"}, Peers: []string{"x/db"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromCNP(tt.p, policyk8s.Cluster{Services: cluster})
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "cnp"}, tt.want)
		})
	}
}

// In a clusterwide policy a Service named without a namespace is looked
// for in every namespace, as in Cilium.
func TestToServicesClusterwide(t *testing.T) {
	web := []string{"other/web", "x/web", "y/web"}
	tests := []struct {
		name string
		p    *v2.CiliumClusterwideNetworkPolicy
		want []string
	}{
		{"by name in every namespace", makeCCNP(egress(toServices(byName("db", "")))), []string{"x/db", "y/db"}},
		{"by name in one", makeCCNP(egress(toServices(byName("db", "y")))), []string{"y/db"}},
		{"by labels in every namespace", makeCCNP(egress(toServices(bySelector(es("tier", "front"), "")))), []string{"y/web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromCCNP(tt.p, policyk8s.Cluster{Services: cluster})
			if err != nil {
				t.Fatal(err)
			}
			checkRules(t, rules, policy.Origin{Kind: policy.KindCCNP, Name: "ccnp"},
				[]ruleView{{Dir: spec.Egress, DefaultDeny: true, Subject: web, Peers: tt.want}})
		})
	}
}

func TestToServicesRefused(t *testing.T) {
	bad := &api.EndpointSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Has"}}}
	p := makeCNP(egress(toServices(
		byName("db", ""),
		api.Service{K8sService: &api.K8sServiceNamespace{Namespace: "x"}},
		api.Service{},
		api.Service{K8sService: &api.K8sServiceNamespace{ServiceName: "db"}, K8sServiceSelector: &api.K8sServiceSelectorNamespace{}},
		byName("Not_A_Name", "y!"),
		bySelector(bad, ""),
	)))
	rules, err := policyk8s.FromCNP(p, policyk8s.Cluster{Services: cluster})
	checkErr(t, err, []string{
		"spec.egress[0].toServices[1].k8sService.serviceName: Required",
		"spec.egress[0].toServices[2].k8sService: Required",
		"spec.egress[0].toServices[3].k8sServiceSelector: Invalid",
		"spec.egress[0].toServices[4].k8sService.serviceName: Invalid",
		"spec.egress[0].toServices[4].k8sService.namespace: Invalid",
		"spec.egress[0].toServices[5].k8sServiceSelector.selector.matchExpressions[0].operator",
	})
	if rules != nil {
		t.Errorf("rules %v with an error", rules)
	}
}
