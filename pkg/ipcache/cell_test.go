package ipcache

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	"github.com/cilium-go/cilium/pkg/node"
)

func entry(id identity.NumericIdentity, tunnel string) spec.IPCacheEntry {
	e := spec.IPCacheEntry{Identity: id}
	if tunnel != "" {
		e.TunnelEndpoint = addr(tunnel)
	}
	return e
}

func local(ip string, id identity.NumericIdentity) endpoint.Endpoint {
	return endpoint.Endpoint{IPv4: addr(ip), Identity: id}
}

func node4(name, ip, podCIDR string, self bool) node.Node {
	n := node.Node{Name: name, IPv4: addr(ip), Self: self}
	if podCIDR != "" {
		n.PodCIDR = pfx(podCIDR)
	}
	return n
}

func withHealth(n node.Node, ip string) node.Node {
	n.HealthIPv4 = addr(ip)
	return n
}

// The precedence between sources that name the same address.
func TestDesiredIPCache(t *testing.T) {
	tests := []struct {
		name string
		in   Cluster
		want map[netip.Prefix]spec.IPCacheEntry
	}{
		{name: "empty", want: map[netip.Prefix]spec.IPCacheEntry{}},
		{
			name: "local endpoints alone, as with Kubernetes off",
			in:   Cluster{Local: []endpoint.Endpoint{local("10.0.1.5", 300), {Identity: 301}}},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("10.0.1.5/32"): entry(300, "")},
		},
		{
			name: "a local endpoint wins over a node and a remote endpoint",
			in: Cluster{
				Local:  []endpoint.Endpoint{local("10.0.1.5", 300)},
				Remote: []RemoteEndpoint{{IP: addr("10.0.1.5"), Node: addr("192.168.0.3"), Identity: 400}},
				Nodes:  []node.Node{node4("b", "10.0.1.5", "", false)},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("10.0.1.5/32"): entry(300, "")},
		},
		{
			name: "a node wins over a remote endpoint",
			in: Cluster{
				Remote: []RemoteEndpoint{{IP: addr("192.168.0.2"), Node: addr("192.168.0.3"), Identity: 400}},
				Nodes:  []node.Node{node4("a", "192.168.0.2", "", true), node4("b", "192.168.0.3", "", false)},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.3/32"): entry(6, "")},
		},
		{
			name: "what this node published is not taken back from the cluster",
			in: Cluster{
				Remote: []RemoteEndpoint{{IP: addr("10.0.1.6"), Node: addr("192.168.0.2"), Identity: 300},
					{IP: addr("10.0.2.6"), Node: addr("192.168.0.3"), Identity: 301}},
				Nodes: []node.Node{node4("a", "192.168.0.2", "", true), node4("b", "192.168.0.3", "", false)},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.3/32"): entry(6, ""),
				pfx("10.0.2.6/32"): entry(301, "192.168.0.3")},
		},
		{
			name: "an endpoint behind an address that is no node is left out",
			in: Cluster{
				Remote: []RemoteEndpoint{{IP: addr("10.9.0.1"), Node: addr("203.0.113.7"), Identity: 301}},
				Nodes:  []node.Node{node4("a", "192.168.0.2", "", true)},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, "")},
		},
		{
			name: "an address in a node's pod CIDR is only that node's to publish",
			in: Cluster{
				Remote: []RemoteEndpoint{{IP: addr("10.0.1.9"), Node: addr("192.168.0.3"), Identity: 400},
					{IP: addr("10.0.3.9"), Node: addr("192.168.0.3"), Identity: 400},
					{IP: addr("10.0.2.9"), Node: addr("192.168.0.3"), Identity: 301}},
				Nodes: []node.Node{node4("a", "192.168.0.2", "10.0.1.0/24", true), node4("b", "192.168.0.3", "10.0.2.0/24", false),
					node4("c", "192.168.0.4", "10.0.3.0/24", false)},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.2/32"): entry(1, ""), pfx("192.168.0.3/32"): entry(6, ""),
				pfx("192.168.0.4/32"): entry(6, ""), pfx("10.0.2.9/32"): entry(301, "192.168.0.3")},
		},
		{
			name: "a node's health endpoint in its own pod CIDR, behind the node, over a remote endpoint",
			in: Cluster{
				Remote: []RemoteEndpoint{{IP: addr("10.0.2.7"), Node: addr("192.168.0.3"), Identity: 400}},
				Nodes: []node.Node{
					withHealth(node4("b", "192.168.0.3", "10.0.2.0/24", false), "10.0.2.7"),
					withHealth(node4("c", "192.168.0.4", "10.0.3.0/24", false), "10.0.2.8"), // in b's pod CIDR
					withHealth(node4("d", "192.168.0.5", "", false), "10.0.4.1"),            // no pod CIDR to hold it
				},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{pfx("192.168.0.3/32"): entry(6, ""), pfx("192.168.0.4/32"): entry(6, ""),
				pfx("192.168.0.5/32"): entry(6, ""), pfx("10.0.2.7/32"): entry(4, "192.168.0.3")},
		},
		{
			name: "policy prefixes: the world's under pods and nodes, in-cluster ones beside them",
			in: Cluster{
				Local: []endpoint.Endpoint{local("10.0.1.5", 300), local("10.0.1.6", 301)},
				Nodes: []node.Node{node4("a", "192.168.0.2", "", true)},
				Prefixes: []PolicyPrefixRow{
					{Prefix: pfx("10.0.0.0/8"), Identity: cidr(1)},
					{Prefix: pfx("10.0.0.0/8"), Identity: cidr(2), InCluster: true},
					{Prefix: pfx("10.0.1.5/32"), Identity: cidr(3)}, // a pod's address: the pod keeps it
					{Prefix: pfx("10.0.1.5/32"), Identity: cidr(4), InCluster: true},
					{Prefix: pfx("192.168.0.0/16"), Identity: cidr(5)},
				},
			},
			want: map[netip.Prefix]spec.IPCacheEntry{
				pfx("10.0.1.5/32"):    {Identity: 300, CIDRIdentity: cidr(4)}, // the most specific in-cluster prefix
				pfx("10.0.1.6/32"):    {Identity: 301, CIDRIdentity: cidr(2)},
				pfx("192.168.0.2/32"): entry(1, ""), // no in-cluster prefix holds the node
				pfx("10.0.0.0/8"):     {Identity: cidr(1)},
				pfx("192.168.0.0/16"): {Identity: cidr(5)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DesiredIPCache(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DesiredIPCache()\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func cidr(n identity.NumericIdentity) identity.NumericIdentity { return identity.LocalIdentityFlag | n }
