package ipcache_test

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/ipcache"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/k8stest"
	"github.com/cilium-go/cilium/pkg/node"
)

func local(ip string, id identity.NumericIdentity) endpoint.Endpoint {
	return endpoint.Endpoint{IPv4: netip.MustParseAddr(ip), Identity: id}
}

func entry(id identity.NumericIdentity, tunnel string) spec.IPCacheEntry {
	e := spec.IPCacheEntry{Identity: id}
	if tunnel != "" {
		e.TunnelEndpoint = netip.MustParseAddr(tunnel)
	}
	return e
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// clusterOf translates the objects into the cluster the ipcache computes
// from.
func clusterOf(self string, local []endpoint.Endpoint, ceps []*v2.CiliumEndpoint, nodes []*corev1.Node,
	ciliumNodes []*v2.CiliumNode) ipcache.Cluster {
	c := ipcache.Cluster{Local: local, Nodes: node.Merge(self, nodes, ciliumNodes)}
	for _, cep := range ceps {
		if ep, ok := ipcache.RemoteEndpointOf(cep); ok {
			c.Remote = append(c.Remote, ep)
		}
	}
	return c
}

// objects are what the Kubernetes tables hold.
type objects struct {
	NodeName        string
	Local           []endpoint.Endpoint
	CiliumEndpoints []*v2.CiliumEndpoint
	Nodes           []*corev1.Node
	CiliumNodes     []*v2.CiliumNode
}

// TestClusterFromObjects: the ipcache and the routes as the Kubernetes
// objects make them.
func TestClusterFromObjects(t *testing.T) {
	tests := []struct {
		name      string
		in        objects
		want      map[netip.Prefix]spec.IPCacheEntry
		wantNodes []spec.RemoteNode
	}{
		{name: "empty", in: objects{NodeName: "a"}, want: map[netip.Prefix]spec.IPCacheEntry{}},
		{
			name: "two nodes, local and remote pods",
			in: objects{
				NodeName: "a",
				Local:    []endpoint.Endpoint{local("10.0.1.5", 300)},
				Nodes: []*corev1.Node{
					k8stest.Node("a", "192.168.0.2", "10.0.1.0/24"),
					k8stest.Node("b", "192.168.0.3", "10.0.2.0/24"),
				},
				CiliumEndpoints: []*v2.CiliumEndpoint{
					k8stest.CiliumEndpoint("shop", "web-a", "10.0.1.5", "192.168.0.2", 300), // ours: local wins
					k8stest.CiliumEndpoint("shop", "web-b", "10.0.2.7", "192.168.0.3", 300),
					k8stest.CiliumEndpoint("shop", "db-b", "10.0.2.8", "192.168.0.3", 301),
				},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{
				pfx("10.0.1.5/32"):    entry(300, ""),
				pfx("10.0.2.7/32"):    entry(300, "192.168.0.3"),
				pfx("10.0.2.8/32"):    entry(301, "192.168.0.3"),
				pfx("192.168.0.2/32"): entry(1, ""),
				pfx("192.168.0.3/32"): entry(6, ""),
			},
			wantNodes: []spec.RemoteNode{{IPv4: netip.MustParseAddr("192.168.0.3"), PodCIDR: pfx("10.0.2.0/24")}},
		},
		{
			name: "CiliumNode fills the pod CIDR and the address of a Node not seen yet",
			in: objects{
				NodeName:    "a",
				Nodes:       []*corev1.Node{k8stest.Node("a", "192.168.0.2", ""), k8stest.Node("b", "192.168.0.3", "")},
				CiliumNodes: []*v2.CiliumNode{k8stest.CiliumNode("b", "192.168.0.3", "10.0.2.0/24"), k8stest.CiliumNode("c", "192.168.0.4", "10.0.3.0/24")},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{
				pfx("192.168.0.2/32"): entry(1, ""),
				pfx("192.168.0.3/32"): entry(6, ""),
				pfx("192.168.0.4/32"): entry(6, ""),
			},
			wantNodes: []spec.RemoteNode{
				{IPv4: netip.MustParseAddr("192.168.0.3"), PodCIDR: pfx("10.0.2.0/24")},
				{IPv4: netip.MustParseAddr("192.168.0.4"), PodCIDR: pfx("10.0.3.0/24")},
			},
		},
		{
			name: "the cluster-pool CIDR in the CiliumNode wins over the Node's",
			in: objects{
				NodeName:    "a",
				Nodes:       []*corev1.Node{k8stest.Node("a", "192.168.0.2", ""), k8stest.Node("b", "192.168.0.3", "10.1.0.0/24")},
				CiliumNodes: []*v2.CiliumNode{k8stest.CiliumNode("b", "192.168.0.3", "10.0.2.0/24")},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{
				pfx("192.168.0.2/32"): entry(1, ""),
				pfx("192.168.0.3/32"): entry(6, ""),
			},
			wantNodes: []spec.RemoteNode{{IPv4: netip.MustParseAddr("192.168.0.3"), PodCIDR: pfx("10.0.2.0/24")}},
		},
		{
			name: "a CiliumEndpoint cannot take over a node address",
			in: objects{
				NodeName:        "a",
				Nodes:           []*corev1.Node{k8stest.Node("a", "192.168.0.2", ""), k8stest.Node("b", "192.168.0.3", "")},
				CiliumEndpoints: []*v2.CiliumEndpoint{k8stest.CiliumEndpoint("evil", "x", "192.168.0.2", "192.168.0.3", 400)},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{
				pfx("192.168.0.2/32"): entry(1, ""),
				pfx("192.168.0.3/32"): entry(6, ""),
			},
		},
		{
			name: "incomplete objects are skipped",
			in: objects{
				NodeName: "a",
				Nodes:    []*corev1.Node{k8stest.Node("nameless-ip", "", "10.0.9.0/24")},
				CiliumEndpoints: []*v2.CiliumEndpoint{
					k8stest.CiliumEndpoint("shop", "no-node", "10.0.2.9", "", 300),
					k8stest.CiliumEndpoint("shop", "no-id", "10.0.2.10", "192.168.0.3", 0),
					k8stest.CiliumEndpoint("shop", "v6-only", "fd00::1", "192.168.0.3", 300),
					{ObjectMeta: metav1.ObjectMeta{Name: "no-status"}},
				},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterOf(tt.in.NodeName, tt.in.Local, tt.in.CiliumEndpoints, tt.in.Nodes, tt.in.CiliumNodes)
			if got := ipcache.DesiredIPCache(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DesiredIPCache()\n got %v\nwant %v", got, tt.want)
			}
			if got := ipcache.RemoteNodes(c.Nodes); !reflect.DeepEqual(got, tt.wantNodes) {
				t.Errorf("RemoteNodes()\n got %v\nwant %v", got, tt.wantNodes)
			}
		})
	}
}
