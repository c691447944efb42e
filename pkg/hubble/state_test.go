package hubble

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/internal/testenv"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/k8s/agent/agenttest"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
)

// Hubble names a flow's remote side from the tables: the CiliumEndpoint
// with the address, and an identity's labels (a reserved one's, or its
// CiliumIdentity's).
func TestAgentStateReadsTheTables(t *testing.T) {
	cl := agenttest.Start(t, "a", nil)
	s := &agentState{db: cl.DB, ceps: cl.Tables.CiliumEndpoints, identities: cl.Tables.CiliumIdentities, pods: cl.Tables.Pods}
	ctx := context.Background()
	// db is this node's pod, of a Deployment: its flows name the workload.
	yes := true
	if _, err := cl.Clients.Kube.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", GenerateName: "store-7f9c-", Labels: map[string]string{"pod-template-hash": "7f9c"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "store-7f9c", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Clients.Cilium.CiliumV2().CiliumEndpoints("shop").Create(ctx,
		k8stest.CiliumEndpoint("shop", "db", "10.0.2.8", "192.168.0.3", 301), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Clients.Cilium.CiliumV2().CiliumIdentities().Create(ctx, &v2.CiliumIdentity{ObjectMeta: metav1.ObjectMeta{Name: "301"},
		SecurityLabels: map[string]string{"k8s:app": "db"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		ep, ok := s.EndpointByIP(netip.MustParseAddr("10.0.2.8"))
		if !ok || ep.PodName != "db" || ep.Namespace != "shop" || ep.Identity != 301 {
			return fmt.Errorf("10.0.2.8: %+v %v", ep, ok)
		}
		if len(ep.Workloads) != 1 || ep.Workloads[0].GetKind() != "Deployment" || ep.Workloads[0].GetName() != "store" {
			return fmt.Errorf("10.0.2.8's workloads: %v", ep.Workloads)
		}
		ls, ok := s.IdentityLabels(301)
		if !ok || !slices.Equal(ls, []string{"k8s:app=db"}) {
			return fmt.Errorf("identity 301: %v %v", ls, ok)
		}
		return nil
	})
	if _, ok := s.EndpointByIP(netip.MustParseAddr("10.0.2.9")); ok {
		t.Error("an address no CiliumEndpoint has was found")
	}
	if ls, ok := s.IdentityLabels(identity.World); !ok || !slices.Contains(ls, "reserved:world") {
		t.Errorf("world: %v %v", ls, ok)
	}
	if _, ok := s.IdentityLabels(999); ok {
		t.Error("an unknown identity has labels")
	}
	// Without Kubernetes: reserved identities only.
	off := &agentState{db: cl.DB}
	if _, ok := off.EndpointByIP(netip.MustParseAddr("10.0.2.8")); ok {
		t.Error("an endpoint found without Kubernetes")
	}
	if _, ok := off.IdentityLabels(identity.World); !ok {
		t.Error("no labels for world without Kubernetes")
	}
}
