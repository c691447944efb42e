package ciliumendpoint

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/labels"
)

func TestCiliumEndpoint(t *testing.T) {
	pod := k8stest.Pod("shop", "web")
	ep := endpoint.Endpoint{ID: 7, PodNamespace: "shop", PodName: "web",
		IPv4: netip.MustParseAddr("10.0.1.5"), Identity: 300}
	id := &identity.Identity{ID: 300, Labels: labels.FromStrings("k8s:app=web", "k8s:io.kubernetes.pod.namespace=shop")}
	nodeIP := netip.MustParseAddr("192.168.0.2")

	tests := []struct {
		name       string
		id         *identity.Identity
		nodeIP     netip.Addr
		wantLabels []string
		wantNode   string
	}{
		{name: "full", id: id, nodeIP: nodeIP,
			wantLabels: []string{"k8s:app=web", "k8s:io.kubernetes.pod.namespace=shop"}, wantNode: "192.168.0.2"},
		// Labels of another identity must not be published under this one.
		{name: "stale identity", id: &identity.Identity{ID: 301, Labels: id.Labels}, nodeIP: nodeIP, wantNode: "192.168.0.2"},
		{name: "node ip unknown", id: id,
			wantLabels: []string{"k8s:app=web", "k8s:io.kubernetes.pod.namespace=shop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cep := CiliumEndpoint(pod, ep, tt.id, tt.nodeIP)
			if cep.Name != "web" || cep.Namespace != "shop" {
				t.Errorf("name %s/%s, want shop/web", cep.Namespace, cep.Name)
			}
			if cep.Kind != "CiliumEndpoint" || cep.APIVersion != "cilium.io/v2" {
				t.Errorf("type %s %s", cep.APIVersion, cep.Kind)
			}
			if len(cep.OwnerReferences) != 1 {
				t.Fatalf("owner references %v, want the pod", cep.OwnerReferences)
			}
			if o := cep.OwnerReferences[0]; o.Kind != "Pod" || o.APIVersion != "v1" || o.Name != "web" || o.UID != pod.UID {
				t.Errorf("owner %+v, want pod web %s", o, pod.UID)
			}
			want := v2.EndpointStatus{
				ID:             7,
				Identity:       &v2.EndpointIdentity{ID: 300, Labels: tt.wantLabels},
				State:          "ready",
				ServiceAccount: "default",
				Networking: &v2.EndpointNetworking{
					Addressing: v2.AddressPairList{{IPV4: "10.0.1.5"}},
					NodeIP:     tt.wantNode,
				},
			}
			if !reflect.DeepEqual(cep.Status, want) {
				t.Errorf("status\n got %+v %+v %+v\nwant %+v %+v %+v", cep.Status, cep.Status.Identity,
					cep.Status.Networking, want, want.Identity, want.Networking)
			}
			// What this node publishes, another node reads back.
			got, ok := ipcache.RemoteEndpointOf(cep)
			if tt.nodeIP.IsValid() && (!ok || got != ipcache.RemoteEndpoint{IP: ep.IPv4, Node: tt.nodeIP, Identity: 300}) {
				t.Errorf("read back %+v %v", got, ok)
			}
		})
	}
}
