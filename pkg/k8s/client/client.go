// Package client is a typed Kubernetes client for Cilium's custom resources
// (cilium.io/v2 and v2alpha1), with informers, listers and a fake for tests.
//
// It is a thin layer over client-go's generic gentype clients rather than
// client-gen output: the generated code for five kinds is a few thousand lines
// of boilerplate around exactly these generic types, and the generics keep the
// same method sets (Get, List, Watch, Create, Update, UpdateStatus, Delete,
// Patch), so callers and fakes look like any client-go clientset.
package client

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2alpha1"
)

// Scheme knows Cilium's kinds; Codecs and ParameterCodec are built from it.
var (
	Scheme         = runtime.NewScheme()
	Codecs         = serializer.NewCodecFactory(Scheme)
	ParameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{v2.AddToScheme, v2alpha1.AddToScheme} {
		if err := add(Scheme); err != nil {
			panic(err) // static registration; failing is a programming error
		}
	}
}

// ResourceInterface is the typed client of one kind: T the object, L its list.
type ResourceInterface[T runtime.Object, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// Typed clients of each kind.
type (
	CiliumNetworkPolicyInterface            = ResourceInterface[*v2.CiliumNetworkPolicy, *v2.CiliumNetworkPolicyList]
	CiliumClusterwideNetworkPolicyInterface = ResourceInterface[*v2.CiliumClusterwideNetworkPolicy, *v2.CiliumClusterwideNetworkPolicyList]
	CiliumIdentityInterface                 = ResourceInterface[*v2.CiliumIdentity, *v2.CiliumIdentityList]
	CiliumEndpointInterface                 = ResourceInterface[*v2.CiliumEndpoint, *v2.CiliumEndpointList]
	CiliumNodeInterface                     = ResourceInterface[*v2.CiliumNode, *v2.CiliumNodeList]
	CiliumCIDRGroupInterface                = ResourceInterface[*v2.CiliumCIDRGroup, *v2.CiliumCIDRGroupList]
	CiliumLoadBalancerIPPoolInterface       = ResourceInterface[*v2.CiliumLoadBalancerIPPool, *v2.CiliumLoadBalancerIPPoolList]
	CiliumEndpointSliceInterface            = ResourceInterface[*v2alpha1.CiliumEndpointSlice, *v2alpha1.CiliumEndpointSliceList]
	CiliumL2AnnouncementPolicyInterface     = ResourceInterface[*v2alpha1.CiliumL2AnnouncementPolicy, *v2alpha1.CiliumL2AnnouncementPolicyList]
)

// CiliumV2Interface reaches the cilium.io/v2 kinds.
type CiliumV2Interface interface {
	CiliumNetworkPolicies(namespace string) CiliumNetworkPolicyInterface
	CiliumClusterwideNetworkPolicies() CiliumClusterwideNetworkPolicyInterface
	CiliumIdentities() CiliumIdentityInterface
	CiliumEndpoints(namespace string) CiliumEndpointInterface
	CiliumNodes() CiliumNodeInterface
	CiliumCIDRGroups() CiliumCIDRGroupInterface
	CiliumLoadBalancerIPPools() CiliumLoadBalancerIPPoolInterface
}

// CiliumV2alpha1Interface reaches the cilium.io/v2alpha1 kinds.
type CiliumV2alpha1Interface interface {
	CiliumEndpointSlices() CiliumEndpointSliceInterface
	CiliumL2AnnouncementPolicies() CiliumL2AnnouncementPolicyInterface
}

// Interface is the clientset: what agents and the operator depend on, so tests
// can pass NewFake instead.
type Interface interface {
	CiliumV2() CiliumV2Interface
	CiliumV2alpha1() CiliumV2alpha1Interface
}

// Clientset talks to a real API server.
type Clientset struct {
	v2       *v2Client
	v2alpha1 *v2alpha1Client
}

// CiliumV2 returns the cilium.io/v2 clients.
func (c *Clientset) CiliumV2() CiliumV2Interface { return c.v2 }

// CiliumV2alpha1 returns the cilium.io/v2alpha1 clients.
func (c *Clientset) CiliumV2alpha1() CiliumV2alpha1Interface { return c.v2alpha1 }

// NewForConfig builds a clientset from a REST config (e.g. from a kubeconfig).
// The config is copied; both versions share one HTTP client.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	restFor := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		c.ContentType = runtime.ContentTypeJSON
		c.NegotiatedSerializer = Codecs.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("rest client %s: %w", gv, err)
		}
		return rc, nil
	}
	rc2, err := restFor(v2.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	rc2a1, err := restFor(v2alpha1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Clientset{v2: &v2Client{rc2}, v2alpha1: &v2alpha1Client{rc2a1}}, nil
}

type v2Client struct{ rc rest.Interface }

func (c *v2Client) CiliumNetworkPolicies(ns string) CiliumNetworkPolicyInterface {
	return gentype.NewClientWithList(v2.CNPPluralName, c.rc, ParameterCodec, ns,
		func() *v2.CiliumNetworkPolicy { return &v2.CiliumNetworkPolicy{} },
		func() *v2.CiliumNetworkPolicyList { return &v2.CiliumNetworkPolicyList{} })
}

func (c *v2Client) CiliumClusterwideNetworkPolicies() CiliumClusterwideNetworkPolicyInterface {
	return gentype.NewClientWithList(v2.CCNPPluralName, c.rc, ParameterCodec, "",
		func() *v2.CiliumClusterwideNetworkPolicy { return &v2.CiliumClusterwideNetworkPolicy{} },
		func() *v2.CiliumClusterwideNetworkPolicyList { return &v2.CiliumClusterwideNetworkPolicyList{} })
}

func (c *v2Client) CiliumIdentities() CiliumIdentityInterface {
	return gentype.NewClientWithList(v2.CIDPluralName, c.rc, ParameterCodec, "",
		func() *v2.CiliumIdentity { return &v2.CiliumIdentity{} },
		func() *v2.CiliumIdentityList { return &v2.CiliumIdentityList{} })
}

func (c *v2Client) CiliumEndpoints(ns string) CiliumEndpointInterface {
	return gentype.NewClientWithList(v2.CEPPluralName, c.rc, ParameterCodec, ns,
		func() *v2.CiliumEndpoint { return &v2.CiliumEndpoint{} },
		func() *v2.CiliumEndpointList { return &v2.CiliumEndpointList{} })
}

func (c *v2Client) CiliumNodes() CiliumNodeInterface {
	return gentype.NewClientWithList(v2.CNPluralNameForNode, c.rc, ParameterCodec, "",
		func() *v2.CiliumNode { return &v2.CiliumNode{} },
		func() *v2.CiliumNodeList { return &v2.CiliumNodeList{} })
}

func (c *v2Client) CiliumCIDRGroups() CiliumCIDRGroupInterface {
	return gentype.NewClientWithList(v2.CCGPluralName, c.rc, ParameterCodec, "",
		func() *v2.CiliumCIDRGroup { return &v2.CiliumCIDRGroup{} },
		func() *v2.CiliumCIDRGroupList { return &v2.CiliumCIDRGroupList{} })
}

func (c *v2Client) CiliumLoadBalancerIPPools() CiliumLoadBalancerIPPoolInterface {
	return gentype.NewClientWithList(v2.PoolPluralName, c.rc, ParameterCodec, "",
		func() *v2.CiliumLoadBalancerIPPool { return &v2.CiliumLoadBalancerIPPool{} },
		func() *v2.CiliumLoadBalancerIPPoolList { return &v2.CiliumLoadBalancerIPPoolList{} })
}

type v2alpha1Client struct{ rc rest.Interface }

func (c *v2alpha1Client) CiliumEndpointSlices() CiliumEndpointSliceInterface {
	return gentype.NewClientWithList(v2alpha1.CESPluralName, c.rc, ParameterCodec, "",
		func() *v2alpha1.CiliumEndpointSlice { return &v2alpha1.CiliumEndpointSlice{} },
		func() *v2alpha1.CiliumEndpointSliceList { return &v2alpha1.CiliumEndpointSliceList{} })
}

func (c *v2alpha1Client) CiliumL2AnnouncementPolicies() CiliumL2AnnouncementPolicyInterface {
	return gentype.NewClientWithList(v2alpha1.L2PolicyPluralName, c.rc, ParameterCodec, "",
		func() *v2alpha1.CiliumL2AnnouncementPolicy { return &v2alpha1.CiliumL2AnnouncementPolicy{} },
		func() *v2alpha1.CiliumL2AnnouncementPolicyList { return &v2alpha1.CiliumL2AnnouncementPolicyList{} })
}
