package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	ciliumio "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io"
)

// Version is this package's API version.
const Version = "v2alpha1"

// SchemeGroupVersion is cilium.io/v2alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: ciliumio.GroupName, Version: Version}

// Kind and plural resource name of CiliumEndpointSlice.
const (
	CESKindDefinition = "CiliumEndpointSlice"
	CESPluralName     = "ciliumendpointslices"
)

// Kind and plural resource name of CiliumL2AnnouncementPolicy.
const (
	L2PolicyKindDefinition = "CiliumL2AnnouncementPolicy"
	L2PolicyPluralName     = "ciliuml2announcementpolicies"
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
	scheme.AddKnownTypes(SchemeGroupVersion, &CiliumEndpointSlice{}, &CiliumEndpointSliceList{},
		&CiliumL2AnnouncementPolicy{}, &CiliumL2AnnouncementPolicyList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
