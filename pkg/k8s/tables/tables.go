package tables

import (
	"context"
	"net/netip"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
)

// The tables' names in statedb (and in its script commands and dumps).
const (
	PodsName             = "k8s-pods"
	NamespacesName       = "k8s-namespaces"
	NodesName            = "k8s-nodes"
	ServicesName         = "k8s-services"
	EndpointSlicesName   = "k8s-endpointslices"
	NetworkPoliciesName  = "k8s-networkpolicies"
	CiliumNodesName      = "k8s-ciliumnodes"
	CiliumEndpointsName  = "k8s-ciliumendpoints"
	CiliumIdentitiesName = "k8s-ciliumidentities"
	CNPsName             = "k8s-cnps"
	CCNPsName            = "k8s-ccnps"
	CIDRGroupsName       = "k8s-cidrgroups"
	L2PoliciesName       = "k8s-l2announcementpolicies"
	NodeLeasesName       = "k8s-l2-node-leases"
)

// NodeLeaseLabel marks the Leases of nodes' L2 announcements, which the
// NodeLeases table holds: one per node, held by the node, in the agents'
// namespace (pkg/l2announce).
const NodeLeaseLabel = "l2announce.cilium.io/node"

// ServiceIndex finds a Service's EndpointSlices by the Service's Key
// ("namespace/name", from the slice's kubernetes.io/service-name label).
var ServiceIndex = statedb.Index[*discoveryv1.EndpointSlice, string]{
	Name: "service",
	FromObject: func(es *discoveryv1.EndpointSlice) index.KeySet {
		if n := es.Labels[discoveryv1.LabelServiceName]; n != "" {
			return index.NewKeySet(index.String(es.Namespace + "/" + n))
		}
		return index.KeySet{}
	},
	FromKey:    index.String,
	FromString: index.FromString,
}

// EndpointIPIndex finds CiliumEndpoints, of any node, by their addresses.
var EndpointIPIndex = statedb.Index[*v2.CiliumEndpoint, netip.Addr]{
	Name: "ip",
	FromObject: func(cep *v2.CiliumEndpoint) index.KeySet {
		var keys []index.Key
		if cep.Status.Networking != nil {
			for _, pair := range cep.Status.Networking.Addressing {
				if pair == nil {
					continue
				}
				for _, s := range []string{pair.IPV4, pair.IPV6} {
					if a, err := netip.ParseAddr(s); err == nil {
						keys = append(keys, index.NetIPAddr(a))
					}
				}
			}
		}
		if len(keys) == 0 {
			return index.KeySet{}
		}
		return index.NewKeySet(keys[0], keys[1:]...)
	},
	FromKey:    index.NetIPAddr,
	FromString: index.NetIPAddrString,
}

// trim drops what no consumer reads: the managed fields are often larger
// than the rest of an object.
func trim[T Object](o T) T {
	o.SetManagedFields(nil)
	return o
}

// lister is one kind's typed client, cluster-wide or in one namespace.
type lister[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// listWatch lists and watches through c, narrowed by tweak; cs tells the
// reflector whether the server side streams lists (fakes do not).
func listWatch[L runtime.Object](cs any, c lister[L], tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return c.Watch(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, cs)
}

// labelled narrows a list to the objects that have the label key.
func labelled(key string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = key }
}

// onNode narrows a list of pods to those scheduled on node.
func onNode(node string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}
}

// Clients are what the reflectors list and watch through, and this node's
// name, which narrows the pods to those on it.
type Clients struct {
	Kube     kubernetes.Interface
	Cilium   client.Interface
	NodeName string
}
