// Package agent is the agent's Kubernetes side: the API clients and the
// watchers of pods, namespaces, nodes and Cilium objects. They feed the
// ipcache (as its ClusterSource), identities, CiliumEndpoints and the pod
// CIDR, which take what they need in their own packages.
package agent

import (
	"context"
	"errors"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/client"
	"github.com/cilium-go/cilium/pkg/labels"
)

// Watchers hold the agent's view of the cluster: this node's pods, all
// namespaces, nodes, CiliumNodes, CiliumEndpoints and CiliumIdentities.
type Watchers struct {
	NodeName         string
	Pods             cache.SharedIndexInformer
	Namespaces       cache.SharedIndexInformer
	Nodes            cache.SharedIndexInformer
	CiliumNodes      cache.SharedIndexInformer
	CiliumEndpoints  cache.SharedIndexInformer
	CiliumIdentities cache.SharedIndexInformer
}

// NewWatchers builds the informers; Run starts them.
func NewWatchers(c *Clients, nodeName string, resync time.Duration) *Watchers {
	local := kubeinformers.NewSharedInformerFactoryWithOptions(c.Kube, resync,
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
		}))
	all := kubeinformers.NewSharedInformerFactory(c.Kube, resync)
	w := &Watchers{
		NodeName:         nodeName,
		Pods:             local.Core().V1().Pods().Informer(),
		Namespaces:       all.Core().V1().Namespaces().Informer(),
		Nodes:            all.Core().V1().Nodes().Informer(),
		CiliumNodes:      client.NewCiliumNodeInformer(c.Cilium, resync, nil),
		CiliumEndpoints:  client.NewCiliumEndpointInformer(c.Cilium, "", resync, cache.Indexers{byIPv4: ciliumEndpointIPv4s}),
		CiliumIdentities: client.NewCiliumIdentityInformer(c.Cilium, resync, nil),
	}
	return w
}

func (w *Watchers) informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{w.Pods, w.Namespaces, w.Nodes, w.CiliumNodes, w.CiliumEndpoints, w.CiliumIdentities}
}

// Run starts every informer until ctx ends.
func (w *Watchers) Run(ctx context.Context) {
	for _, inf := range w.informers() {
		go inf.RunWithContext(ctx)
	}
}

// WaitForSync returns once every informer has listed, or an error when
// ctx ends first.
func (w *Watchers) WaitForSync(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, inf := range w.informers() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("kubernetes caches not synced")
	}
	return nil
}

// OnChange calls fn after every change of the watched objects, until
// stop. fn must not block: it is called from the informers' goroutines.
func (w *Watchers) OnChange(fn func()) (stop func()) {
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { fn() },
		UpdateFunc: func(any, any) { fn() },
		DeleteFunc: func(any) { fn() },
	}
	var regs []func()
	for _, inf := range w.informers() {
		// Fails only once the informer stopped, when there is nothing
		// left to hear.
		if reg, err := inf.AddEventHandler(h); err == nil {
			regs = append(regs, func() { _ = inf.RemoveEventHandler(reg) })
		}
	}
	return func() {
		for _, r := range regs {
			r()
		}
	}
}

// Pod returns this node's pod from the cache.
func (w *Watchers) Pod(namespace, name string) (*corev1.Pod, bool) {
	obj, ok, err := w.Pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p, ok := obj.(*corev1.Pod)
	return p, ok
}

// byIPv4 indexes CiliumEndpoints by their IPv4 addresses.
const byIPv4 = "ipv4"

func ciliumEndpointIPv4s(obj any) ([]string, error) {
	cep, ok := obj.(*v2.CiliumEndpoint)
	if !ok || cep.Status.Networking == nil {
		return nil, nil
	}
	var out []string
	for _, pair := range cep.Status.Networking.Addressing {
		if pair != nil && pair.IPV4 != "" {
			out = append(out, pair.IPV4)
		}
	}
	return out, nil
}

// CiliumEndpointByIP is the CiliumEndpoint, of any node, with addr.
func (w *Watchers) CiliumEndpointByIP(addr netip.Addr) (*v2.CiliumEndpoint, bool) {
	objs, err := w.CiliumEndpoints.GetIndexer().ByIndex(byIPv4, addr.String())
	if err != nil || len(objs) == 0 {
		return nil, false
	}
	cep, ok := objs[0].(*v2.CiliumEndpoint)
	return cep, ok
}

// IdentityLabels are the labels of an identity: a reserved one's, or a
// CiliumIdentity's from the cache.
func (w *Watchers) IdentityLabels(num identity.NumericIdentity) (labels.Labels, bool) {
	if r, ok := identity.ReservedIdentity(num); ok {
		return r.Labels, true
	}
	obj, ok, err := w.CiliumIdentities.GetStore().GetByKey(num.String())
	if err != nil || !ok {
		return nil, false
	}
	ci, ok := obj.(*v2.CiliumIdentity)
	if !ok {
		return nil, false
	}
	return labels.FromClusterIdentity(ci.SecurityLabels), true
}

func listAs[T any](inf cache.SharedIndexInformer) []T {
	objs := inf.GetStore().List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// OwnPodCIDR is the first IPv4 CIDR of spec.ipam.podCIDRs of this node's
// CiliumNode, invalid while there is none.
func (w *Watchers) OwnPodCIDR() netip.Prefix {
	obj, ok, err := w.CiliumNodes.GetStore().GetByKey(w.NodeName)
	if err != nil || !ok {
		return netip.Prefix{}
	}
	n, ok := obj.(*v2.CiliumNode)
	if !ok {
		return netip.Prefix{}
	}
	return firstIPv4Prefix(n.Spec.IPAM.PodCIDRs)
}

// PodInput reads a local pod and its namespace from the caches: what
// bears on the pod's identity.
func (w *Watchers) PodInput(namespace, name string) (labels.PodInput, bool) {
	p, ok := w.Pod(namespace, name)
	if !ok {
		return labels.PodInput{}, false
	}
	obj, ok, err := w.Namespaces.GetStore().GetByKey(namespace)
	if err != nil || !ok {
		return labels.PodInput{}, false
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return labels.PodInput{}, false
	}
	return labels.PodInput{PodLabels: p.Labels, Namespace: p.Namespace, NamespaceLabels: ns.Labels,
		ServiceAccount: p.Spec.ServiceAccountName}, true
}
