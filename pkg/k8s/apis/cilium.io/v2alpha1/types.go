package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// CiliumEndpointSlice groups the core of many CiliumEndpoints of one namespace
// so agents watch a few objects instead of one per pod.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumEndpointSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Namespace string               `json:"namespace,omitempty"`
	Endpoints []CoreCiliumEndpoint `json:"endpoints"`
}

// CiliumEndpointSliceList is a list of CiliumEndpointSlice.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumEndpointSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumEndpointSlice `json:"items"`
}

// CoreCiliumEndpoint is the part of a CiliumEndpoint other nodes need.
type CoreCiliumEndpoint struct {
	Name           string                 `json:"name,omitempty"`
	IdentityID     int64                  `json:"id,omitempty"`
	PodUID         string                 `json:"pod-uid,omitempty"`
	Networking     *v2.EndpointNetworking `json:"networking,omitempty"`
	Encryption     v2.EncryptionSpec      `json:"encryption,omitempty"`
	NamedPorts     []v2.NamedPort         `json:"named-ports,omitempty"`
	ServiceAccount string                 `json:"service-account,omitempty"`
}
