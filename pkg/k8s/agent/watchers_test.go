package agent_test

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
	"github.com/cilium-go/cilium/pkg/labels"
)

// Hubble names a flow's remote side from the caches: the CiliumEndpoint
// with the address, and an identity's labels.
func TestWatchersLookups(t *testing.T) {
	c, w := agenttest.StartWatchers(t, "a", nil)
	ctx := context.Background()
	if _, err := c.Cilium.CiliumV2().CiliumEndpoints("shop").Create(ctx,
		k8stest.CiliumEndpoint("shop", "db", "10.0.2.8", "192.168.0.3", 301), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cilium.CiliumV2().CiliumIdentities().Create(ctx, &v2.CiliumIdentity{ObjectMeta: metav1.ObjectMeta{Name: "301"},
		SecurityLabels: map[string]string{"k8s:app": "db"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		cep, ok := w.CiliumEndpointByIP(netip.MustParseAddr("10.0.2.8"))
		if !ok || cep.Name != "db" || cep.Namespace != "shop" {
			return fmt.Errorf("10.0.2.8: %v %v", cep, ok)
		}
		ls, ok := w.IdentityLabels(301)
		if !ok || !slices.Equal(ls.Strings(), []string{"k8s:app=db"}) {
			return fmt.Errorf("identity 301: %v %v", ls, ok)
		}
		return nil
	})
	if _, ok := w.CiliumEndpointByIP(netip.MustParseAddr("10.0.2.9")); ok {
		t.Error("an address no CiliumEndpoint has was found")
	}
	if ls, ok := w.IdentityLabels(identity.World); !ok || !ls.Has(labels.New(labels.SourceReserved, "world", "")) {
		t.Errorf("world: %v %v", ls, ok)
	}
	if _, ok := w.IdentityLabels(999); ok {
		t.Error("an unknown identity has labels")
	}
}
