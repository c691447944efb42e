package client

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
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

// NewCiliumNodeInformer watches CiliumNodes (the operator's IPAM).
func NewCiliumNodeInformer(c Interface, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewInformer(c, c.CiliumV2().CiliumNodes(), &v2.CiliumNode{}, resync, indexers)
}
