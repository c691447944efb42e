package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/endpoint/endpointtest"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// A policy's toServices follow the Services they name: the agent
// translates the policy again when such a Service or its EndpointSlices
// come, change or go, without the policy changing.
func TestAgentPolicyFollowsServices(t *testing.T) {
	kube := kubefake.NewClientset()
	cilium := k8sclient.NewFake()
	dir := t.TempDir()
	c := startOnFakes(t, &k8sagent.Clients{Kube: kube, Cilium: cilium}, endpointtest.NewDatapath(), dir, baseArgs(dir))
	ctx := context.Background()

	// peersOf waits for the policy's one rule to name want as peers.
	peersOf := func(policy string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, func() error {
			rules, err := c.PolicyRules(ctx)
			if err != nil {
				return err
			}
			for _, r := range rules {
				if r.Origin.Name == policy {
					if r.Direction != "egress" || !r.DefaultDeny || !slices.Equal(r.Peers, want) {
						return fmt.Errorf("rule %+v, want an isolating egress rule to %v", r, want)
					}
					return nil
				}
			}
			return fmt.Errorf("no rule of %s in %+v", policy, rules)
		})
	}
	cnp := func(name string, ref api.K8sServiceNamespace) *v2.CiliumNetworkPolicy {
		rule := &api.Rule{EndpointSelector: &api.EndpointSelector{MatchLabels: map[string]string{"app": "web"}}}
		rule.Egress = []api.EgressRule{{}}
		rule.Egress[0].ToServices = []api.Service{{K8sService: &ref}}
		return &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: rule}
	}
	for _, p := range []*v2.CiliumNetworkPolicy{
		cnp("to-db", api.K8sServiceNamespace{ServiceName: "db"}),
		cnp("to-ext", api.K8sServiceNamespace{ServiceName: "ext", Namespace: "shop"}),
	} {
		if _, err := cilium.CiliumV2().CiliumNetworkPolicies("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No Service yet: the rules allow nothing, and still isolate.
	peersOf("to-db")
	peersOf("to-ext")

	// A Service with a selector: its pods, whatever it selects now.
	svcs := kube.CoreV1().Services("shop")
	db := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}}}
	if _, err := svcs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-db", `ns=shop:{"matchLabels":{"app":"db"}}`)
	db.Spec.Selector = map[string]string{"app": "postgres"}
	if _, err := svcs.Update(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-db", `ns=shop:{"matchLabels":{"app":"postgres"}}`)
	if err := svcs.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-db")

	// A Service without one: the addresses of its EndpointSlices.
	if _, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ext"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-ext")
	epSlices := kube.DiscoveryV1().EndpointSlices("shop")
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ext-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "ext"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.10"}}},
	}
	if _, err := epSlices.Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-ext", "cidr:192.0.2.10/32")
	es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"192.0.2.11"}})
	if _, err := epSlices.Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-ext", "cidr:192.0.2.10/32", "cidr:192.0.2.11/32")
	if err := epSlices.Delete(ctx, "ext-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	peersOf("to-ext")
}
