package k8s_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
	policyk8s "github.com/cilium-go/cilium/pkg/policy/k8s"
)

// fakeGroups holds CiliumCIDRGroups as the agent's cache does.
type fakeGroups []*v2.CiliumCIDRGroup

func (f fakeGroups) CIDRGroup(name string) (*v2.CiliumCIDRGroup, bool) {
	i := slices.IndexFunc(f, func(g *v2.CiliumCIDRGroup) bool { return g.Name == name })
	if i < 0 {
		return nil, false
	}
	return f[i], true
}

func (f fakeGroups) ListCIDRGroups() []*v2.CiliumCIDRGroup { return slices.Clone(f) }

func makeGroup(name string, lbls map[string]string, cidrs ...api.CIDR) *v2.CiliumCIDRGroup {
	return &v2.CiliumCIDRGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: v2.CiliumCIDRGroupSpec{ExternalCIDRs: cidrs}}
}

// peerKeys are the keys of the peers of each rule: for CIDR selectors,
// their prefix and excepts.
func peerKeys(rules []policy.Rule) [][]string {
	var out [][]string
	for _, r := range rules {
		keys := []string{}
		for _, p := range r.Peers {
			keys = append(keys, p.Key())
		}
		out = append(out, keys)
	}
	return out
}

func toGroups(rs ...api.CIDRRule) func(*api.Rule) {
	return func(r *api.Rule) {
		r.EgressDeny = append(r.EgressDeny, api.EgressDenyRule{EgressCommonRule: api.EgressCommonRule{ToCIDRSet: rs}})
	}
}

func fromGroups(rs ...api.CIDRRule) func(*api.Rule) {
	return func(r *api.Rule) {
		r.Ingress = append(r.Ingress, api.IngressRule{IngressCommonRule: api.IngressCommonRule{FromCIDRSet: rs}})
	}
}

// A CIDR rule that names groups selects their prefixes as toCIDRSet
// would, less its excepts; what the groups do not (yet) hold selects
// nothing.
func TestCIDRGroupPeers(t *testing.T) {
	groups := fakeGroups{
		// The connectivity suite's shape: the world's prefix (and an
		// IPv6 one, which selects nothing in this IPv4-only cluster).
		makeGroup("external", map[string]string{"destination": "external"}, "192.0.2.0/24", "2001:db8::/64"),
		makeGroup("dns", map[string]string{"destination": "external", "svc": "dns"}, "8.8.8.8/32", "1.1.1.1"),
		makeGroup("lab", map[string]string{"destination": "internal"}, "10.0.0.0/8"),
		makeGroup("empty", map[string]string{"destination": "nowhere"}),
		makeGroup("broken", map[string]string{"destination": "broken"}, "not-a-cidr", "10.1.0.0/16"),
	}
	tests := []struct {
		name string
		rule func(*api.Rule)
		want []string
	}{
		{"by name", toGroups(api.CIDRRule{CIDRGroupRef: "lab"}), []string{"cidr:10.0.0.0/8"}},
		{"by name with excepts, as cilium-cli's connectivity test writes it",
			toGroups(api.CIDRRule{CIDRGroupRef: "external", ExceptCIDRs: []api.CIDR{"192.0.2.1/32", "2001:db8::1/128"}}),
			[]string{"cidr:192.0.2.0/24 except 192.0.2.1/32"}},
		{"an except holding a whole prefix leaves it out",
			toGroups(api.CIDRRule{CIDRGroupRef: "dns", ExceptCIDRs: []api.CIDR{"8.0.0.0/8"}}),
			[]string{"cidr:1.1.1.1/32"}},
		{"a missing group selects nothing", toGroups(api.CIDRRule{CIDRGroupRef: "later"}), []string{}},
		{"an empty group selects nothing", toGroups(api.CIDRRule{CIDRGroupRef: "empty"}), []string{}},
		{"a prefix the group cannot hold selects nothing", toGroups(api.CIDRRule{CIDRGroupRef: "broken"}),
			[]string{"cidr:10.1.0.0/16"}},
		{"by labels: every group they match",
			toGroups(api.CIDRRule{CIDRGroupSelector: &api.EndpointSelector{MatchLabels: map[string]string{"destination": "external"}},
				ExceptCIDRs: []api.CIDR{"192.0.2.1/32"}}),
			[]string{"cidr:1.1.1.1/32", "cidr:8.8.8.8/32", "cidr:192.0.2.0/24 except 192.0.2.1/32"}},
		{"by expressions", fromGroups(api.CIDRRule{CIDRGroupSelector: &api.EndpointSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "destination", Operator: metav1.LabelSelectorOpIn, Values: []string{"internal", "nowhere"}}}}}),
			[]string{"cidr:10.0.0.0/8"}},
		{"labels no group has", toGroups(api.CIDRRule{CIDRGroupSelector: &api.EndpointSelector{
			MatchLabels: map[string]string{"destination": "mars"}}}), []string{}},
		{"groups, prefixes and overlaps once", toGroups(
			api.CIDRRule{CIDRGroupRef: "dns"}, api.CIDRRule{Cidr: "8.8.8.8/32"},
			api.CIDRRule{CIDRGroupSelector: &api.EndpointSelector{MatchLabels: map[string]string{"svc": "dns"}}}),
			[]string{"cidr:1.1.1.1/32", "cidr:8.8.8.8/32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := policyk8s.FromCNP(makeCNP(tt.rule), policyk8s.Cluster{CIDRGroups: groups})
			if err != nil {
				t.Fatal(err)
			}
			if got := peerKeys(rules); len(got) != 1 || !slices.Equal(got[0], tt.want) {
				t.Fatalf("peers %q, want [%q]", got, tt.want)
			}
		})
	}
}

// The suite's policy denies the group's other addresses and not the
// excepted one; the same policy without the group denies nothing, and
// a change of the group changes what it denies.
func TestCIDRGroupVerdicts(t *testing.T) {
	p := makeCNP(toGroups(api.CIDRRule{CIDRGroupRef: "external", ExceptCIDRs: []api.CIDR{"192.0.2.1/32"}}))
	verdicts := func(groups fakeGroups) map[string]bool {
		rules, err := policyk8s.FromCNP(p, policyk8s.Cluster{CIDRGroups: groups})
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) != 1 || rules[0].Direction != spec.Egress || !rules[0].Deny {
			t.Fatalf("rules %v, want one egress deny rule", rules)
		}
		out := map[string]bool{}
		for _, addr := range []string{"192.0.2.1/32", "192.0.2.2/32", "198.51.100.7/32"} {
			id := &policy.Identity{ID: 1<<24 | 1, Prefix: mustPrefix(t, addr)}
			out[addr] = slices.ContainsFunc(rules[0].Peers, func(s policy.Selector) bool { return s.Selects(id) })
		}
		return out
	}
	check := func(got map[string]bool, denied ...string) {
		t.Helper()
		for addr, d := range got {
			if d != slices.Contains(denied, addr) {
				t.Errorf("%s denied=%v, want the denied ones to be %v", addr, d, denied)
			}
		}
	}
	check(verdicts(nil))
	check(verdicts(fakeGroups{makeGroup("external", nil, "192.0.2.0/24")}), "192.0.2.2/32")
	check(verdicts(fakeGroups{makeGroup("external", nil, "192.0.2.0/24", "198.51.100.0/24")}), "192.0.2.2/32", "198.51.100.7/32")
	check(verdicts(fakeGroups{makeGroup("other", nil, "192.0.2.0/24")}))
}

func TestCIDRGroupRefused(t *testing.T) {
	p := makeCNP(toGroups(
		api.CIDRRule{CIDRGroupRef: "a", Cidr: "10.0.0.0/8"},
		api.CIDRRule{CIDRGroupRef: "a", CIDRGroupSelector: &api.EndpointSelector{}},
		api.CIDRRule{ExceptCIDRs: []api.CIDR{"10.0.0.0/8"}},
		api.CIDRRule{CIDRGroupRef: "UPPER"},
		api.CIDRRule{CIDRGroupRef: "a", ExceptCIDRs: []api.CIDR{"10.0.0.0/99"}},
	), fromGroups(api.CIDRRule{CIDRGroupSelector: &api.EndpointSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Has"}}}}))
	rules, err := policyk8s.FromCNP(p, policyk8s.Cluster{CIDRGroups: fakeGroups{makeGroup("a", nil, "10.0.0.0/8")}})
	checkErr(t, err, []string{
		"spec.egressDeny[0].toCIDRSet[0].cidrGroupRef: Invalid value: \"\": only one of cidr, cidrGroupRef or cidrGroupSelector may be set, not cidr and cidrGroupRef",
		"spec.egressDeny[0].toCIDRSet[1].cidrGroupSelector: Invalid value",
		"spec.egressDeny[0].toCIDRSet[2].cidr: Required value: one of cidr, cidrGroupRef or cidrGroupSelector is required",
		"spec.egressDeny[0].toCIDRSet[3].cidrGroupRef: Invalid value: \"UPPER\"",
		"spec.egressDeny[0].toCIDRSet[4].except[0]: Invalid value: \"10.0.0.0/99\"",
		"spec.ingress[0].fromCIDRSet[0].cidrGroupSelector.matchExpressions[0].operator",
	})
	if rules != nil {
		t.Errorf("rules %v with an error", rules)
	}
	if err != nil && strings.Count(err.Error(), "toCIDRSet[4].except[0]") != 1 {
		t.Errorf("the bad except reported more than once: %v", err)
	}
}

func mustPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
