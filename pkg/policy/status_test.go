package policy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// Conditions are written through the status client, never the agent's
// own, and a policy's latest verdict is the one left.
func TestReporterWritesTheLatestVerdictThroughItsOwnClient(t *testing.T) {
	p := &v2.CiliumNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"}}
	own, status := client.NewFake(p.DeepCopy()), client.NewFake(p.DeepCopy())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := &k8sagent.Clients{Kube: kubefake.NewClientset(), Cilium: own, Status: status}
	r := newReporter(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), clients, "node-a")
	r.report(KindCNP, p, errors.New("spec.egress[0].toFQDNs: not supported"))
	r.report(KindCNP, p, nil)

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
