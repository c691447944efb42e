package client

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	k8stesting "k8s.io/client-go/testing"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
)

// Fake is an in-memory clientset for tests, backed by client-go's object
// tracker: creates of an existing name fail with AlreadyExists, updates check
// resourceVersion, and watches see every change. Reactors can be prepended on
// Fake to inject errors.
type Fake struct {
	k8stesting.Fake
	Tracker k8stesting.ObjectTracker
}

// NewFake returns a fake clientset holding objects.
func NewFake(objects ...runtime.Object) *Fake {
	o := k8stesting.NewObjectTracker(Scheme, Codecs.UniversalDecoder())
	for _, obj := range objects {
		if err := o.Add(obj); err != nil {
			panic(err) // test setup with a bad object
		}
	}
	f := &Fake{Tracker: o}
	f.AddReactor("*", "*", k8stesting.ObjectReaction(o))
	f.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := o.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, w, nil
	})
	return f
}

// IsWatchListSemanticsUnSupported tells informers that the object tracker
// cannot stream lists, so they list then watch.
func (f *Fake) IsWatchListSemanticsUnSupported() bool { return true }

// CiliumV2 returns fake cilium.io/v2 clients.
func (f *Fake) CiliumV2() CiliumV2Interface { return fakeV2{&f.Fake} }

// CiliumV2alpha1 returns fake cilium.io/v2alpha1 clients.
func (f *Fake) CiliumV2alpha1() CiliumV2alpha1Interface { return fakeV2alpha1{&f.Fake} }

type fakeV2 struct{ f *k8stesting.Fake }

func (c fakeV2) CiliumNetworkPolicies(ns string) CiliumNetworkPolicyInterface {
	return gentype.NewFakeClientWithList(c.f, ns,
		v2.SchemeGroupVersion.WithResource(v2.CNPPluralName), v2.SchemeGroupVersion.WithKind(v2.CNPKindDefinition),
		func() *v2.CiliumNetworkPolicy { return &v2.CiliumNetworkPolicy{} },
		func() *v2.CiliumNetworkPolicyList { return &v2.CiliumNetworkPolicyList{} },
		func(dst, src *v2.CiliumNetworkPolicyList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumNetworkPolicyList) []*v2.CiliumNetworkPolicy { return gentype.ToPointerSlice(l.Items) },
		func(l *v2.CiliumNetworkPolicyList, items []*v2.CiliumNetworkPolicy) {
			l.Items = gentype.FromPointerSlice(items)
		})
}

func (c fakeV2) CiliumClusterwideNetworkPolicies() CiliumClusterwideNetworkPolicyInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2.SchemeGroupVersion.WithResource(v2.CCNPPluralName), v2.SchemeGroupVersion.WithKind(v2.CCNPKindDefinition),
		func() *v2.CiliumClusterwideNetworkPolicy { return &v2.CiliumClusterwideNetworkPolicy{} },
		func() *v2.CiliumClusterwideNetworkPolicyList { return &v2.CiliumClusterwideNetworkPolicyList{} },
		func(dst, src *v2.CiliumClusterwideNetworkPolicyList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumClusterwideNetworkPolicyList) []*v2.CiliumClusterwideNetworkPolicy {
			return gentype.ToPointerSlice(l.Items)
		},
		func(l *v2.CiliumClusterwideNetworkPolicyList, items []*v2.CiliumClusterwideNetworkPolicy) {
			l.Items = gentype.FromPointerSlice(items)
		})
}

func (c fakeV2) CiliumIdentities() CiliumIdentityInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2.SchemeGroupVersion.WithResource(v2.CIDPluralName), v2.SchemeGroupVersion.WithKind(v2.CIDKindDefinition),
		func() *v2.CiliumIdentity { return &v2.CiliumIdentity{} },
		func() *v2.CiliumIdentityList { return &v2.CiliumIdentityList{} },
		func(dst, src *v2.CiliumIdentityList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumIdentityList) []*v2.CiliumIdentity { return gentype.ToPointerSlice(l.Items) },
		func(l *v2.CiliumIdentityList, items []*v2.CiliumIdentity) { l.Items = gentype.FromPointerSlice(items) })
}

func (c fakeV2) CiliumEndpoints(ns string) CiliumEndpointInterface {
	return gentype.NewFakeClientWithList(c.f, ns,
		v2.SchemeGroupVersion.WithResource(v2.CEPPluralName), v2.SchemeGroupVersion.WithKind(v2.CEPKindDefinition),
		func() *v2.CiliumEndpoint { return &v2.CiliumEndpoint{} },
		func() *v2.CiliumEndpointList { return &v2.CiliumEndpointList{} },
		func(dst, src *v2.CiliumEndpointList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumEndpointList) []*v2.CiliumEndpoint { return gentype.ToPointerSlice(l.Items) },
		func(l *v2.CiliumEndpointList, items []*v2.CiliumEndpoint) { l.Items = gentype.FromPointerSlice(items) })
}

func (c fakeV2) CiliumNodes() CiliumNodeInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2.SchemeGroupVersion.WithResource(v2.CNPluralNameForNode), v2.SchemeGroupVersion.WithKind(v2.CNKindDefinition),
		func() *v2.CiliumNode { return &v2.CiliumNode{} },
		func() *v2.CiliumNodeList { return &v2.CiliumNodeList{} },
		func(dst, src *v2.CiliumNodeList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumNodeList) []*v2.CiliumNode { return gentype.ToPointerSlice(l.Items) },
		func(l *v2.CiliumNodeList, items []*v2.CiliumNode) { l.Items = gentype.FromPointerSlice(items) })
}

func (c fakeV2) CiliumCIDRGroups() CiliumCIDRGroupInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2.SchemeGroupVersion.WithResource(v2.CCGPluralName), v2.SchemeGroupVersion.WithKind(v2.CCGKindDefinition),
		func() *v2.CiliumCIDRGroup { return &v2.CiliumCIDRGroup{} },
		func() *v2.CiliumCIDRGroupList { return &v2.CiliumCIDRGroupList{} },
		func(dst, src *v2.CiliumCIDRGroupList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumCIDRGroupList) []*v2.CiliumCIDRGroup { return gentype.ToPointerSlice(l.Items) },
		func(l *v2.CiliumCIDRGroupList, items []*v2.CiliumCIDRGroup) {
			l.Items = gentype.FromPointerSlice(items)
		})
}

func (c fakeV2) CiliumLoadBalancerIPPools() CiliumLoadBalancerIPPoolInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2.SchemeGroupVersion.WithResource(v2.PoolPluralName), v2.SchemeGroupVersion.WithKind(v2.PoolKindDefinition),
		func() *v2.CiliumLoadBalancerIPPool { return &v2.CiliumLoadBalancerIPPool{} },
		func() *v2.CiliumLoadBalancerIPPoolList { return &v2.CiliumLoadBalancerIPPoolList{} },
		func(dst, src *v2.CiliumLoadBalancerIPPoolList) { dst.ListMeta = src.ListMeta },
		func(l *v2.CiliumLoadBalancerIPPoolList) []*v2.CiliumLoadBalancerIPPool {
			return gentype.ToPointerSlice(l.Items)
		},
		func(l *v2.CiliumLoadBalancerIPPoolList, items []*v2.CiliumLoadBalancerIPPool) {
			l.Items = gentype.FromPointerSlice(items)
		})
}

type fakeV2alpha1 struct{ f *k8stesting.Fake }

func (c fakeV2alpha1) CiliumEndpointSlices() CiliumEndpointSliceInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2alpha1.SchemeGroupVersion.WithResource(v2alpha1.CESPluralName),
		v2alpha1.SchemeGroupVersion.WithKind(v2alpha1.CESKindDefinition),
		func() *v2alpha1.CiliumEndpointSlice { return &v2alpha1.CiliumEndpointSlice{} },
		func() *v2alpha1.CiliumEndpointSliceList { return &v2alpha1.CiliumEndpointSliceList{} },
		func(dst, src *v2alpha1.CiliumEndpointSliceList) { dst.ListMeta = src.ListMeta },
		func(l *v2alpha1.CiliumEndpointSliceList) []*v2alpha1.CiliumEndpointSlice {
			return gentype.ToPointerSlice(l.Items)
		},
		func(l *v2alpha1.CiliumEndpointSliceList, items []*v2alpha1.CiliumEndpointSlice) {
			l.Items = gentype.FromPointerSlice(items)
		})
}

func (c fakeV2alpha1) CiliumL2AnnouncementPolicies() CiliumL2AnnouncementPolicyInterface {
	return gentype.NewFakeClientWithList(c.f, "",
		v2alpha1.SchemeGroupVersion.WithResource(v2alpha1.L2PolicyPluralName),
		v2alpha1.SchemeGroupVersion.WithKind(v2alpha1.L2PolicyKindDefinition),
		func() *v2alpha1.CiliumL2AnnouncementPolicy { return &v2alpha1.CiliumL2AnnouncementPolicy{} },
		func() *v2alpha1.CiliumL2AnnouncementPolicyList { return &v2alpha1.CiliumL2AnnouncementPolicyList{} },
		func(dst, src *v2alpha1.CiliumL2AnnouncementPolicyList) { dst.ListMeta = src.ListMeta },
		func(l *v2alpha1.CiliumL2AnnouncementPolicyList) []*v2alpha1.CiliumL2AnnouncementPolicy {
			return gentype.ToPointerSlice(l.Items)
		},
		func(l *v2alpha1.CiliumL2AnnouncementPolicyList, items []*v2alpha1.CiliumL2AnnouncementPolicy) {
			l.Items = gentype.FromPointerSlice(items)
		})
}

var (
	_ Interface = (*Fake)(nil)
	_ Interface = (*Clientset)(nil)
)
