package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// A policy's CIDR group rules follow the CiliumCIDRGroups they name:
// the agent translates the policy again when such a group comes, changes
// or goes, without the policy changing.
func TestAgentPolicyFollowsCIDRGroups(t *testing.T) {
	cilium := k8sclient.NewFake()
	dir := t.TempDir()
	c := startOnFakes(t, &k8sagent.Clients{Kube: kubefake.NewClientset(), Cilium: cilium}, endpointtest.NewDatapath(), dir, baseArgs(dir))
	ctx := context.Background()

	// peersOf waits for the policy's one rule to deny egress to want.
	peersOf := func(policy string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, func() error {
			rules, err := c.PolicyRules(ctx)
			if err != nil {
				return err
			}
			for _, r := range rules {
				if r.Origin.Name == policy {
					if r.Direction != "egress" || r.Verdict != "deny" || !slices.Equal(r.Peers, want) {
						return fmt.Errorf("rule %+v, want an egress deny rule to %v", r, want)
					}
					return nil
				}
			}
			return fmt.Errorf("no rule of %s in %+v", policy, rules)
		})
	}
	cnp := func(name string, r api.CIDRRule) *v2.CiliumNetworkPolicy {
		rule := &api.Rule{EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"kind": "client"}}}
		rule.EgressDeny = []api.EgressDenyRule{{}}
		rule.EgressDeny[0].ToCIDRSet = []api.CIDRRule{r}
		return &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: name}, Spec: rule}
	}
	for _, p := range []*v2.CiliumNetworkPolicy{
		cnp("by-ref", api.CIDRRule{CIDRGroupRef: "external", ExceptCIDRs: []api.CIDR{"192.0.2.1/32"}}),
		cnp("by-label", api.CIDRRule{CIDRGroupSelector: &api.EndpointSelector{MatchLabels: map[string]string{"destination": "external"}}}),
	} {
		if _, err := cilium.CiliumV2().CiliumNetworkPolicies("test").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No group yet: the rules deny nothing.
	peersOf("by-ref")
	peersOf("by-label")

	groups := cilium.CiliumV2().CiliumCIDRGroups()
	g := &v2.CiliumCIDRGroup{ObjectMeta: metav1.ObjectMeta{Name: "external"},
		Spec: v2.CiliumCIDRGroupSpec{ExternalCIDRs: []api.CIDR{"192.0.2.0/24"}}}
	if _, err := groups.Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("by-ref", "cidr:192.0.2.0/24 except 192.0.2.1/32")
	peersOf("by-label")

	// Its labels make the selector select it; another prefix, both.
	g.Labels = map[string]string{"destination": "external"}
	g.Spec.ExternalCIDRs = append(g.Spec.ExternalCIDRs, "198.51.100.0/24")
	if _, err := groups.Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("by-ref", "cidr:192.0.2.0/24 except 192.0.2.1/32", "cidr:198.51.100.0/24")
	peersOf("by-label", "cidr:192.0.2.0/24", "cidr:198.51.100.0/24")

	// Another group with the label adds to the selector's peers only.
	other := &v2.CiliumCIDRGroup{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: g.Labels},
		Spec: v2.CiliumCIDRGroupSpec{ExternalCIDRs: []api.CIDR{"203.0.113.0/24"}}}
	if _, err := groups.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("by-label", "cidr:192.0.2.0/24", "cidr:198.51.100.0/24", "cidr:203.0.113.0/24")
	peersOf("by-ref", "cidr:192.0.2.0/24 except 192.0.2.1/32", "cidr:198.51.100.0/24")

	if err := groups.Delete(ctx, "external", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("by-ref")
	peersOf("by-label", "cidr:203.0.113.0/24")
}
