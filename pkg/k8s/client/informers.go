package client

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
)

// NewInformer returns a shared index informer over one kind's typed client c
// of clientset cs, indexed by namespace plus indexers. cs tells the reflector
// whether the server side supports streaming lists (the fake does not).
func NewInformer[T runtime.Object, L runtime.Object](cs Interface, c ResourceInterface[T, L], example T, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, opts)
		},
	}
	all := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for k, v := range indexers {
		all[k] = v
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, cs), example, resync, all)
}

// Informers for each kind. Start them with Run and wait with
// cache.WaitForCacheSync before reading their listers.

// NewCiliumIdentityInformer watches CiliumIdentities.
func NewCiliumIdentityInformer(c Interface, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumIdentities(), &v2.CiliumIdentity{}, resync, indexers)
}

// NewCiliumEndpointInformer watches CiliumEndpoints in namespace ("" for all).
func NewCiliumEndpointInformer(c Interface, namespace string, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumEndpoints(namespace), &v2.CiliumEndpoint{}, resync, indexers)
}

// NewCiliumNodeInformer watches CiliumNodes.
func NewCiliumNodeInformer(c Interface, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumNodes(), &v2.CiliumNode{}, resync, indexers)
}

// NewCiliumNetworkPolicyInformer watches CiliumNetworkPolicies in namespace ("" for all).
func NewCiliumNetworkPolicyInformer(c Interface, namespace string, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumNetworkPolicies(namespace), &v2.CiliumNetworkPolicy{}, resync, indexers)
}

// NewCiliumClusterwideNetworkPolicyInformer watches CiliumClusterwideNetworkPolicies.
func NewCiliumClusterwideNetworkPolicyInformer(c Interface, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumClusterwideNetworkPolicies(), &v2.CiliumClusterwideNetworkPolicy{}, resync, indexers)
}

// NewCiliumCIDRGroupInformer watches CiliumCIDRGroups.
func NewCiliumCIDRGroupInformer(c Interface, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumCIDRGroups(), &v2.CiliumCIDRGroup{}, resync, indexers)
}

// NewCiliumEndpointSliceInformer watches CiliumEndpointSlices.
func NewCiliumEndpointSliceInformer(c Interface, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2alpha1().CiliumEndpointSlices(), &v2alpha1.CiliumEndpointSlice{}, resync, indexers)
}

// Listers read an informer's cache.
type (
	CiliumIdentityLister                 = listers.ResourceIndexer[*v2.CiliumIdentity]
	CiliumEndpointLister                 = listers.ResourceIndexer[*v2.CiliumEndpoint]
	CiliumNodeLister                     = listers.ResourceIndexer[*v2.CiliumNode]
	CiliumNetworkPolicyLister            = listers.ResourceIndexer[*v2.CiliumNetworkPolicy]
	CiliumClusterwideNetworkPolicyLister = listers.ResourceIndexer[*v2.CiliumClusterwideNetworkPolicy]
	CiliumEndpointSliceLister            = listers.ResourceIndexer[*v2alpha1.CiliumEndpointSlice]
	CiliumCIDRGroupLister                = listers.ResourceIndexer[*v2.CiliumCIDRGroup]
)

// NewLister returns a lister over an informer's indexer for resource (a plural
// name of v2 or v2alpha1).
func NewLister[T runtime.Object](inf cache.SharedIndexInformer, plural string) listers.ResourceIndexer[T] {
	gr := v2.Resource(plural)
	if plural == v2alpha1.CESPluralName {
		gr = v2alpha1.Resource(plural)
	}
	return listers.New[T](inf.GetIndexer(), gr)
}
