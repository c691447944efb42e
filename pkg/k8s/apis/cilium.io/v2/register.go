package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	ciliumio "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io"
)

// Version is this package's API version.
const Version = "v2"

// SchemeGroupVersion is cilium.io/v2.
var SchemeGroupVersion = schema.GroupVersion{Group: ciliumio.GroupName, Version: Version}

// Kinds and plural resource names.
const (
	CNPKindDefinition   = "CiliumNetworkPolicy"
	CNPPluralName       = "ciliumnetworkpolicies"
	CCNPKindDefinition  = "CiliumClusterwideNetworkPolicy"
	CCNPPluralName      = "ciliumclusterwidenetworkpolicies"
	CIDKindDefinition   = "CiliumIdentity"
	CIDPluralName       = "ciliumidentities"
	CEPKindDefinition   = "CiliumEndpoint"
	CEPPluralName       = "ciliumendpoints"
	CNKindDefinition    = "CiliumNode"
	CNPluralNameForNode = "ciliumnodes"
	CCGKindDefinition   = "CiliumCIDRGroup"
	CCGPluralName       = "ciliumcidrgroups"
	PoolKindDefinition  = "CiliumLoadBalancerIPPool"
	PoolPluralName      = "ciliumloadbalancerippools"
)

// Resource returns the group-qualified resource for a plural name.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers this version's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this version's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CiliumNetworkPolicy{}, &CiliumNetworkPolicyList{},
		&CiliumClusterwideNetworkPolicy{}, &CiliumClusterwideNetworkPolicyList{},
		&CiliumIdentity{}, &CiliumIdentityList{},
		&CiliumEndpoint{}, &CiliumEndpointList{},
		&CiliumNode{}, &CiliumNodeList{},
		&CiliumCIDRGroup{}, &CiliumCIDRGroupList{},
		&CiliumLoadBalancerIPPool{}, &CiliumLoadBalancerIPPoolList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
