package healthcheck

import (
	"context"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sagent "github.com/cilium-go/cilium/pkg/k8s/agent"
	k8sclient "github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/node"
)

// Only a health address in the node's own pod CIDR is probed: a CiliumNode
// cannot point this node's probes anywhere else.
func TestTargetsProbeHealthAddressesOnlyInThePodCIDR(t *testing.T) {
	ip, pfx := netip.MustParseAddr, netip.MustParsePrefix
	nodes := []node.Node{
		{Name: "a", IPv4: ip("192.0.2.1"), PodCIDR: pfx("10.1.0.0/24"), HealthIPv4: ip("10.1.0.7")},
		{Name: "b", IPv4: ip("192.0.2.2"), PodCIDR: pfx("10.2.0.0/24"), HealthIPv4: ip("169.254.169.254")},
		{Name: "c", IPv4: ip("192.0.2.3"), HealthIPv4: ip("10.3.0.7")}, // no pod CIDR
		{Name: "d", IPv4: ip("192.0.2.4"), PodCIDR: pfx("10.4.0.0/24")},
	}
	ts := Targets(nodes, true)
	if len(ts) != 4 || ts[0].HealthIP != ip("10.1.0.7") || ts[1].HealthIP.IsValid() || ts[2].HealthIP.IsValid() ||
		ts[3].HealthIP.IsValid() || ts[1].NodeIP != ip("192.0.2.2") {
		t.Fatalf("targets %+v", ts)
	}
	if ts := Targets(nodes, false); ts[0].HealthIP.IsValid() {
		t.Fatalf("endpoint health checking off: %+v", ts)
	}
}

// This node comes first, named as the agent knows it, with its own health
// address before its CiliumNode tells it.
func TestWithSelf(t *testing.T) {
	ip, pfx := netip.MustParseAddr, netip.MustParsePrefix
	self := node.Node{Name: "a", Self: true, IPv4: ip("192.0.2.1"), HealthIPv4: ip("10.1.0.7")}
	got := withSelf([]node.Node{
		{Name: "b", IPv4: ip("192.0.2.2")},
		{Name: "a", Self: true, IPv4: ip("192.0.2.9"), PodCIDR: pfx("10.1.0.0/24")},
	}, self)
	if len(got) != 2 || got[0].Name != "a" || got[0].IPv4 != ip("192.0.2.1") || got[0].PodCIDR != pfx("10.1.0.0/24") ||
		got[0].HealthIPv4 != ip("10.1.0.7") || got[1].Name != "b" {
		t.Fatalf("nodes %+v", got)
	}
}

// publish patches spec.health.ipv4 alone: the operator's pod CIDR stays;
// taking an address back from a node without a CiliumNode is no error.
func TestPublish(t *testing.T) {
	ctx := context.Background()
	cilium := k8sclient.NewFake(k8stest.CiliumNode("a", "192.0.2.1", "10.1.0.0/24"))
	c := &k8sagent.Clients{Cilium: cilium}
	if err := publish(ctx, c, "a", netip.MustParseAddr("10.1.0.7")); err != nil {
		t.Fatal(err)
	}
	cn, err := cilium.CiliumV2().CiliumNodes().Get(ctx, "a", metav1.GetOptions{})
	if err != nil || cn.Spec.HealthAddressing.IPv4 != "10.1.0.7" || len(cn.Spec.IPAM.PodCIDRs) != 1 {
		t.Fatalf("CiliumNode %+v %v", cn.Spec, err)
	}
	if err := publish(ctx, c, "a", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if cn, _ = cilium.CiliumV2().CiliumNodes().Get(ctx, "a", metav1.GetOptions{}); cn.Spec.HealthAddressing.IPv4 != "" {
		t.Fatalf("health address %q after taking it back", cn.Spec.HealthAddressing.IPv4)
	}
	if err := publish(ctx, c, "gone", netip.Addr{}); err != nil {
		t.Fatalf("taking back from a node without a CiliumNode: %v", err)
	}
	if err := publish(ctx, c, "gone", netip.MustParseAddr("10.1.0.7")); err == nil {
		t.Fatal("publishing to a node without a CiliumNode succeeded")
	}
}
