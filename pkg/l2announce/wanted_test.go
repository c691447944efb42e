package l2announce

import (
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

func policy(t *testing.T, name string, spec v2alpha1.CiliumL2AnnouncementPolicySpec) Policy {
	t.Helper()
	p, problems := PolicyOf(&v2alpha1.CiliumL2AnnouncementPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	if len(problems) > 0 {
		t.Fatalf("policy %s: %v", name, problems)
	}
	return p
}

func svc(name string, tweak func(*loadbalancer.ServiceRow)) *loadbalancer.ServiceRow {
	r := &loadbalancer.ServiceRow{Service: loadbalancer.Service{
		Name: loadbalancer.ServiceName{Namespace: "default", Name: name}, Type: loadbalancer.TypeLoadBalancer,
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Labels:          map[string]string{"app": name},
	}}
	if tweak != nil {
		tweak(r)
	}
	return r
}

func entries(s ...string) []Entry {
	var out []Entry
	for _, e := range s {
		a, d, _ := strings.Cut(e, "@")
		out = append(out, Entry{Address: netip.MustParseAddr(a), Device: d})
	}
	return out
}

func TestWanted(t *testing.T) {
	node := Node{Name: "node-a", Labels: map[string]string{"zone": "a"}, Devices: []string{"eth0", "eth1", "lo"}}
	lbOnly := v2alpha1.CiliumL2AnnouncementPolicySpec{LoadBalancerIPs: true, Interfaces: []string{"^eth[0-9]+"}}
	ext := netip.MustParseAddr("198.51.100.7")
	name := func(n string) loadbalancer.ServiceName {
		return loadbalancer.ServiceName{Namespace: "default", Name: n}
	}

	for _, tc := range []struct {
		name     string
		policies []v2alpha1.CiliumL2AnnouncementPolicySpec
		services []*loadbalancer.ServiceRow
		want     map[loadbalancer.ServiceName][]Entry
	}{
		{
			name:     "a policy's devices only, its kind of address only",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{lbOnly},
			services: []*loadbalancer.ServiceRow{svc("web", func(r *loadbalancer.ServiceRow) { r.ExternalIPs = []netip.Addr{ext} })},
			want:     map[loadbalancer.ServiceName][]Entry{name("web"): entries("192.0.2.10@eth0", "192.0.2.10@eth1")},
		},
		{
			name:     "external addresses with externalIPs; no interfaces: every device",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{{ExternalIPs: true}},
			services: []*loadbalancer.ServiceRow{svc("web", func(r *loadbalancer.ServiceRow) { r.ExternalIPs = []netip.Addr{ext} })},
			want:     map[loadbalancer.ServiceName][]Entry{name("web"): entries("198.51.100.7@eth0", "198.51.100.7@eth1", "198.51.100.7@lo")},
		},
		{
			name:     "no address of the policy's kind: not a candidate",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{{ExternalIPs: true}},
			services: []*loadbalancer.ServiceRow{svc("web", nil)},
			want:     map[loadbalancer.ServiceName][]Entry{},
		},
		{
			name: "service selector, by label and by the namespace label",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{
				{LoadBalancerIPs: true, Interfaces: []string{"eth0"}, ServiceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				{LoadBalancerIPs: true, Interfaces: []string{"eth1"}, ServiceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"io.kubernetes.service.name": "db"}}},
			},
			services: []*loadbalancer.ServiceRow{svc("web", nil), svc("db", func(r *loadbalancer.ServiceRow) {
				r.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.0.2.11")}
			}), svc("other", nil)},
			want: map[loadbalancer.ServiceName][]Entry{name("web"): entries("192.0.2.10@eth0"), name("db"): entries("192.0.2.11@eth1")},
		},
		{
			name:     "a node the node selector leaves out",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{{LoadBalancerIPs: true, NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}}},
			services: []*loadbalancer.ServiceRow{svc("web", nil)},
			want:     map[loadbalancer.ServiceName][]Entry{},
		},
		{
			name:     "a regex that matches no device",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{{LoadBalancerIPs: true, Interfaces: []string{"^bond"}}},
			services: []*loadbalancer.ServiceRow{svc("web", nil)},
			want:     map[loadbalancer.ServiceName][]Entry{},
		},
		{
			name:     "another class, another proxy's, headless: not ours to announce; our class is",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{lbOnly},
			services: []*loadbalancer.ServiceRow{
				svc("metallb", func(r *loadbalancer.ServiceRow) { r.LoadBalancerClass = "metallb.io/metallb" }),
				svc("proxied", func(r *loadbalancer.ServiceRow) { r.OtherProxy = true }),
				svc("headless", func(r *loadbalancer.ServiceRow) { r.Headless = true }),
				svc("l2", func(r *loadbalancer.ServiceRow) { r.LoadBalancerClass = v2alpha1.L2AnnounceLoadBalancerClass }),
			},
			want: map[loadbalancer.ServiceName][]Entry{name("l2"): entries("192.0.2.10@eth0", "192.0.2.10@eth1")},
		},
		{
			name:     "externalTrafficPolicy Local: only with a ready local backend",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{lbOnly},
			services: []*loadbalancer.ServiceRow{
				svc("none-here", func(r *loadbalancer.ServiceRow) { r.ExternalLocal, r.ReadyNodes = true, []string{"node-b"} }),
				svc("one-here", func(r *loadbalancer.ServiceRow) {
					r.ExternalLocal, r.ReadyNodes = true, []string{"node-a", "node-b"}
					r.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.0.2.12")}
				}),
			},
			want: map[loadbalancer.ServiceName][]Entry{name("one-here"): entries("192.0.2.12@eth0", "192.0.2.12@eth1")},
		},
		{
			name:     "two policies naming one entry: once",
			policies: []v2alpha1.CiliumL2AnnouncementPolicySpec{lbOnly, lbOnly},
			services: []*loadbalancer.ServiceRow{svc("web", nil)},
			want:     map[loadbalancer.ServiceName][]Entry{name("web"): entries("192.0.2.10@eth0", "192.0.2.10@eth1")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pols []Policy
			for i, s := range tc.policies {
				pols = append(pols, policy(t, "p"+string(rune('0'+i)), s))
			}
			got := Wanted(node, pols, tc.services)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPolicyOfNamesWhatIsWrong(t *testing.T) {
	p := &v2alpha1.CiliumL2AnnouncementPolicy{Spec: v2alpha1.CiliumL2AnnouncementPolicySpec{
		Interfaces:      []string{"eth0", "eth[", "(bad"},
		NodeSelector:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Near"}}},
		ServiceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}
	_, problems := PolicyOf(p)
	if _, ok := problems[ConditionBadServiceSelector]; ok || len(problems) != 2 {
		t.Fatalf("problems %v, want the node selector and the interfaces", problems)
	}
	for typ, want := range map[string][]string{
		ConditionBadNodeSelector:   {"spec.nodeSelector", "Near"},
		ConditionBadInterfaceRegex: {"spec.interfaces[1]", "spec.interfaces[2]"},
	} {
		for _, w := range want {
			if err := problems[typ]; err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to name %q", typ, err, w)
			}
		}
	}
}

func TestLeaseNameIsCiliums(t *testing.T) {
	if got := LeaseName(loadbalancer.ServiceName{Namespace: "shop", Name: "web"}); got != "cilium-l2announce-shop-web" {
		t.Fatalf("lease %q", got)
	}
}

func TestOwners(t *testing.T) {
	var services []*loadbalancer.ServiceRow
	for i := range 40 {
		services = append(services, svc("s"+strconv.Itoa(i), nil))
	}
	// One of them may only be announced where its backend is.
	local := svc("local", func(r *loadbalancer.ServiceRow) { r.ExternalLocal, r.ReadyNodes = true, []string{"n3"} })
	services = append(services, local)
	pols := []Policy{policy(t, "all", v2alpha1.CiliumL2AnnouncementPolicySpec{LoadBalancerIPs: true})}
	nodes := []Node{{Name: "n1", Devices: []string{"eth0"}}, {Name: "n2", Devices: []string{"eth0"}},
		{Name: "n3", Devices: []string{"eth0"}}, {Name: "n4"}} // n4 has no device to announce on

	owners := Owners(nodes, pols, services)
	count := map[string]int{}
	for _, s := range services {
		count[owners[s.Name]]++
	}
	if owners[local.Name] != "n3" || count["n4"] != 0 || count[""] != 0 || len(owners) != len(services) {
		t.Fatalf("owners %v: every Service owned once, by a node that may announce it", owners)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if count[n] < 5 {
			t.Errorf("%s owns %d of %d Services: the hash spreads them", n, count[n], len(services))
		}
	}
	// The same view in another order picks the same owners.
	if again := Owners([]Node{nodes[3], nodes[2], nodes[1], nodes[0]}, pols, services); !reflect.DeepEqual(again, owners) {
		t.Fatalf("another order: %v, want %v", again, owners)
	}
	// n2 goes: only its Services move.
	after := Owners([]Node{nodes[0], nodes[2], nodes[3]}, pols, services)
	for s, was := range owners {
		if now := after[s]; was != "n2" && now != was || now == "n2" || now == "" {
			t.Errorf("%s: owned by %s, then %q once n2 went", s, was, now)
		}
	}
}
