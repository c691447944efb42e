package hubble

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

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
	s := &agentState{db: cl.DB, ceps: cl.Tables.CiliumEndpoints, identities: cl.Tables.CiliumIdentities}
	ctx := context.Background()
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
