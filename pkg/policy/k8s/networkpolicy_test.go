package k8s_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// namedIdentity is an identity of the test universe with a name that
// assertions use.
type namedIdentity struct {
	name string
	id   *policy.Identity
}

// universe holds pods in namespaces x, y and other, reserved identities,
// and CIDR identities: outside the cluster (8.8.8.8 also by the name a DNS
// answer gave it), and one a pod's address carries (InCluster).
var universe = func() []namedIdentity {
	var out []namedIdentity
	out = append(out, namedIdentity{"*", &policy.Identity{ID: identity.Unknown}})
	for _, id := range []identity.NumericIdentity{
		identity.Host, identity.World, identity.WorldIPv4, identity.RemoteNode,
		identity.Health, identity.Init, identity.KubeAPIServer,
	} {
		r, _ := identity.ReservedIdentity(id)
		name, _ := id.ReservedName()
		out = append(out, namedIdentity{name, &policy.Identity{ID: id, Labels: r.Labels}})
	}
	nsLabels := map[string]map[string]string{
		"x":     {"team": "a"},
		"y":     {"team": "b"},
		"other": {},
	}
	num := identity.MinClusterIdentity
	for _, p := range []struct{ ns, app string }{{"x", "web"}, {"x", "db"}, {"y", "web"}, {"y", "db"}, {"other", "web"}} {
		out = append(out, namedIdentity{p.ns + "/" + p.app, &policy.Identity{ID: num, Labels: podLabels(p.ns, nsLabels[p.ns], p.app)}})
		num++
	}
	for i, c := range []struct {
		name      string
		prefix    string
		inCluster bool
		names     []string // learned from DNS answers
	}{
		{"cidr:8.8.8.8", "8.8.8.8/32", false, []string{"dns.google."}},
		{"cidr:10.9.9.9", "10.9.9.9/32", false, nil},
		{"cidr:10.0.2.7", "10.0.2.7/32", false, nil},
		{"pod-ip:10.0.1.5", "10.0.1.5/32", true, nil},
	} {
		out = append(out, namedIdentity{c.name, &policy.Identity{
			ID:        identity.LocalIdentityFlag | identity.NumericIdentity(i+1),
			Prefix:    netip.MustParsePrefix(c.prefix),
			InCluster: c.inCluster,
			Names:     c.names,
		}})
	}
	return out
}()

// podLabels are the identity labels of a pod: its own, its namespace, and
// its namespace's labels (with the one the API server sets).
func podLabels(ns string, nsLabels map[string]string, app string) labels.Labels {
	ls := labels.Labels{}
	ls.Add(labels.New(labels.SourceK8s, "app", app))
	ls.Add(labels.New(labels.SourceK8s, labels.KeyPodNamespace, ns))
	ls.Add(labels.New(labels.SourceK8s, labels.PrefixNamespaceLabels+"kubernetes.io/metadata.name", ns))
	for k, v := range nsLabels {
		ls.Add(labels.New(labels.SourceK8s, labels.PrefixNamespaceLabels+k, v))
	}
	return ls
}

// selected names the identities of the universe any of sels selects.
func selected(sels ...policy.Selector) []string {
	var out []string
	for _, ni := range universe {
		if slices.ContainsFunc(sels, func(s policy.Selector) bool { return s.Selects(ni.id) }) {
			out = append(out, ni.name)
		}
	}
	slices.Sort(out)
	return out
}

// ruleView is a rule as a test sees it: by what it selects.
type ruleView struct {
	Dir         spec.Direction
	Deny        bool
	DefaultDeny bool
	Subject     []string
	Peers       []string
	Ports       []policy.Port
	L7          *policy.L7Rules
}

func (v ruleView) String() string {
	return fmt.Sprintf("{%s deny=%v defaultDeny=%v subject=%v peers=%v ports=%v l7=%s}",
		v.Dir, v.Deny, v.DefaultDeny, v.Subject, v.Peers, v.Ports, v.L7.Key())
}

func view(rules []policy.Rule) []ruleView {
	var out []ruleView
	for _, r := range rules {
		out = append(out, ruleView{
			Dir: r.Direction, Deny: r.Deny, DefaultDeny: r.DefaultDeny,
			Subject: selected(r.Subject), Peers: selected(r.Peers...), Ports: r.Ports, L7: r.L7,
		})
	}
	return out
}

// checkRules compares what rules select with want, and their origin.
func checkRules(t *testing.T, rules []policy.Rule, origin policy.Origin, want []ruleView) {
	t.Helper()
	for _, r := range rules {
		if r.Origin != origin {
			t.Errorf("origin %v, want %v", r.Origin, origin)
		}
	}
	if got := view(rules); !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %v\nwant %v", got, want)
	}
}

// checkErr wants an error naming every one of paths.
func checkErr(t *testing.T, err error, paths []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %v", paths)
	}
	for _, p := range paths {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
}

func makeNP(tweaks ...func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "np"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	for _, f := range tweaks {
		f(np)
	}
	return np
}

func npPolicyTypes(types ...networkingv1.PolicyType) func(*networkingv1.NetworkPolicy) {
	return func(np *networkingv1.NetworkPolicy) { np.Spec.PolicyTypes = types }
}

func npIngress(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) func(*networkingv1.NetworkPolicy) {
	return func(np *networkingv1.NetworkPolicy) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers, Ports: ports})
	}
}

func npEgress(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) func(*networkingv1.NetworkPolicy) {
	return func(np *networkingv1.NetworkPolicy) {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: peers, Ports: ports})
	}
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func pods(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

func namespaces(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

func ipBlock(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func npPort(proto corev1.Protocol, port any, endPort ...int32) networkingv1.NetworkPolicyPort {
	p := networkingv1.NetworkPolicyPort{}
	if proto != "" {
		p.Protocol = &proto
	}
	switch v := port.(type) {
	case int:
		p.Port = new(intstr.FromInt32(int32(v)))
	case string:
		p.Port = new(intstr.FromString(v))
	}
	if len(endPort) > 0 {
		p.EndPort = &endPort[0]
	}
	return p
}

func TestFromNetworkPolicy(t *testing.T) {
	allPods := []string{"other/web", "x/db", "x/web", "y/db", "y/web"}
	tcp := func(port, end uint16) policy.Port {
		return policy.Port{Protocol: spec.ProtoTCP, Port: port, EndPort: end}
	}
	in := func(peers []string, ports ...policy.Port) ruleView {
		return ruleView{Dir: spec.Ingress, DefaultDeny: true, Subject: []string{"x/web"}, Peers: peers, Ports: ports}
	}
	eg := func(peers []string, ports ...policy.Port) ruleView {
		v := in(peers, ports...)
		v.Dir = spec.Egress
		return v
	}
	tests := []struct {
		name    string
		np      *networkingv1.NetworkPolicy
		want    []ruleView
		wantErr []string
	}{{
		name: "default policy types: ingress only",
		np:   makeNP(npIngress([]networkingv1.NetworkPolicyPeer{pods(sel("app", "db"))}, npPort("", 80))),
		want: []ruleView{in([]string{"x/db"}, tcp(80, 0))},
	}, {
		name: "default policy types with egress rules isolate both ways",
		np:   makeNP(npEgress([]networkingv1.NetworkPolicyPeer{pods(sel("app", "db"))})),
		want: []ruleView{in(nil), eg([]string{"x/db"})},
	}, {
		name: "egress only",
		np: makeNP(npPolicyTypes(networkingv1.PolicyTypeEgress),
			npIngress(nil), // ignored: ingress is not isolated
			npEgress([]networkingv1.NetworkPolicyPeer{ipBlock("10.0.0.0/8", "10.0.2.0/24")})),
		want: []ruleView{eg([]string{"cidr:10.9.9.9", "pod-ip:10.0.1.5"})},
	}, {
		name: "deny all ingress",
		np: makeNP(npPolicyTypes(networkingv1.PolicyTypeIngress), func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = metav1.LabelSelector{}
		}),
		want: []ruleView{{Dir: spec.Ingress, DefaultDeny: true, Subject: []string{"x/db", "x/web"}}},
	}, {
		name: "allow all ingress",
		np:   makeNP(npIngress(nil)),
		want: []ruleView{in([]string{"*"})},
	}, {
		name: "namespace and pod selector in one peer",
		np: makeNP(npIngress([]networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: sel("team", "b"), PodSelector: sel("app", "web"),
		}})),
		want: []ruleView{in([]string{"y/web"})},
	}, {
		name: "namespace and pod selector in two peers",
		np:   makeNP(npIngress([]networkingv1.NetworkPolicyPeer{namespaces(sel("team", "b")), pods(sel("app", "web"))})),
		want: []ruleView{in([]string{"x/web", "y/db", "y/web"})},
	}, {
		name: "empty namespace selector selects every pod",
		np:   makeNP(npIngress([]networkingv1.NetworkPolicyPeer{namespaces(sel())})),
		want: []ruleView{in(allPods)},
	}, {
		name: "empty namespace selector with pod selector",
		np: makeNP(npIngress([]networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: sel(), PodSelector: sel("app", "db"),
		}})),
		want: []ruleView{in([]string{"x/db", "y/db"})},
	}, {
		name: "namespace by name",
		np:   makeNP(npIngress([]networkingv1.NetworkPolicyPeer{namespaces(sel("kubernetes.io/metadata.name", "y"))})),
		want: []ruleView{in([]string{"y/db", "y/web"})},
	}, {
		name: "namespace by expression",
		np: makeNP(npIngress([]networkingv1.NetworkPolicyPeer{namespaces(&metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}},
		})})),
		want: []ruleView{in([]string{"x/db", "x/web", "y/db", "y/web"})},
	}, {
		name: "ipBlock matches pod addresses too",
		np:   makeNP(npIngress([]networkingv1.NetworkPolicyPeer{ipBlock("10.0.0.1/8", "10.0.2.0/24"), ipBlock("0.0.0.0/0", "10.0.0.0/8")})),
		want: []ruleView{in([]string{"cidr:10.9.9.9", "cidr:8.8.8.8", "pod-ip:10.0.1.5", "world", "world-ipv4"})},
	}, {
		name: "ports",
		np: makeNP(npIngress(nil,
			npPort(corev1.ProtocolTCP, 8000, 9000), npPort("", "http"),
			npPort(corev1.ProtocolSCTP, nil), npPort(corev1.ProtocolUDP, 53))),
		want: []ruleView{in([]string{"*"},
			tcp(8000, 9000), policy.Port{Protocol: spec.ProtoTCP, Name: "http"},
			policy.Port{Protocol: spec.ProtoSCTP}, policy.Port{Protocol: spec.ProtoUDP, Port: 53})},
	}, {
		name:    "bad protocol",
		np:      makeNP(npIngress(nil, npPort("ICMP", 8))),
		wantErr: []string{"spec.ingress[0].ports[0].protocol"},
	}, {
		name: "bad ipBlocks",
		np: makeNP(
			npIngress([]networkingv1.NetworkPolicyPeer{pods(sel()), ipBlock("10.0.0.0/33")}),
			npEgress([]networkingv1.NetworkPolicyPeer{ipBlock("10.0.0.0/8", "192.168.0.0/16", "10.0.0.0/8")})),
		wantErr: []string{"spec.ingress[0].from[1].ipBlock.cidr", "spec.egress[0].to[0].ipBlock.except[0]", "spec.egress[0].to[0].ipBlock.except[1]"},
	}, {
		name: "bad port ranges",
		np: makeNP(npEgress(nil,
			npPort(corev1.ProtocolTCP, 80, 79), npPort(corev1.ProtocolTCP, "http", 90), npPort(corev1.ProtocolTCP, nil, 90),
			npPort(corev1.ProtocolTCP, 0), npPort(corev1.ProtocolTCP, "no_name"))),
		wantErr: []string{
			"spec.egress[0].ports[0].endPort", "spec.egress[0].ports[1].endPort", "spec.egress[0].ports[2].endPort",
			"spec.egress[0].ports[3].port", "spec.egress[0].ports[4].port",
		},
	}, {
		name: "bad peers and policy types",
		np: makeNP(npPolicyTypes("Sideways"),
			npIngress([]networkingv1.NetworkPolicyPeer{{PodSelector: sel(), IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}, {}}),
			func(np *networkingv1.NetworkPolicy) {
				np.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
			}),
		wantErr: []string{"spec.ingress[0].from[0]", "spec.ingress[0].from[1]", "spec.policyTypes[0]", "spec.podSelector.matchExpressions[0].operator"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromNetworkPolicy(tt.np)
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
			checkRules(t, rules, policy.Origin{Kind: policy.KindNetworkPolicy, Namespace: "x", Name: "np"}, tt.want)
		})
	}
}
