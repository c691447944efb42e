package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cilium-go/cilium/internal/testenv"
	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/policy"
)

// Conditions are written through the status client, never the agent's
// own, and a policy's latest verdict is the one left.
func TestReporterWritesTheLatestVerdictThroughItsOwnClient(t *testing.T) {
	p := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"}}
	own, status := client.NewFake(p.DeepCopy()), client.NewFake(p.DeepCopy())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := &k8sagent.Clients{Kube: kubefake.NewClientset(), Cilium: own, Status: status}
	r := NewReporter(ctx, slog.New(slog.DiscardHandler), clients, "node-a")
	r.Report(policy.KindCNP, p, errors.New("spec.egress[0].toFQDNs: not supported"))
	r.Report(policy.KindCNP, p, nil)

	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := status.CiliumV2().CiliumNetworkPolicies("x").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) == 1 && got.Status.Conditions[0].Status == metav1.ConditionTrue {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("conditions %+v, want Valid True", got.Status.Conditions)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, a := range own.Actions() {
		t.Errorf("the agent's own client was used: %s %s", a.GetVerb(), a.GetResource().Resource)
	}
}

// A refusal writes this node's entry of the policy's status.nodes, with
// a merge patch that leaves the other nodes' entries, and its clearing
// removes the entry again.
func TestReporterWritesThisNodesRefusal(t *testing.T) {
	p := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"},
		Status: v2.CiliumNetworkPolicyStatus{Nodes: map[string]v2.CiliumNetworkPolicyNodeStatus{"node-b": {Error: "b's"}}}}
	status := client.NewFake(p.DeepCopy())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := &k8sagent.Clients{Kube: kubefake.NewClientset(), Cilium: client.NewFake(), Status: status}
	r := NewReporter(ctx, slog.New(slog.DiscardHandler), clients, "node-a")
	origin := policy.Origin{Kind: policy.KindCNP, Namespace: "x", Name: "p"}
	nodes := func(want func(map[string]v2.CiliumNetworkPolicyNodeStatus) bool) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, func() error {
			got, err := status.CiliumV2().CiliumNetworkPolicies("x").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !want(got.Status.Nodes) {
				return fmt.Errorf("status.nodes %+v", got.Status.Nodes)
			}
			return nil
		})
	}
	r.ReportRefusal(origin, "endpoint 7 (x/web): its policy would need more than 16384 policy map entries")
	nodes(func(n map[string]v2.CiliumNetworkPolicyNodeStatus) bool {
		return strings.Contains(n["node-a"].Error, "endpoint 7") && !n["node-a"].OK && n["node-b"].Error == "b's"
	})
	r.ReportRefusal(origin, "")
	nodes(func(n map[string]v2.CiliumNetworkPolicyNodeStatus) bool {
		_, a := n["node-a"]
		return !a && n["node-b"].Error == "b's"
	})
}
