package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CiliumEndpoint publishes a local endpoint's state (identity, addresses, node)
// so other nodes learn IP -> identity.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Status EndpointStatus `json:"status,omitempty"`
}

// CiliumEndpointList is a list of CiliumEndpoint.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumEndpoint `json:"items"`
}

// EndpointStatus is the published state of an endpoint.
type EndpointStatus struct {
	ID             int64               `json:"id,omitempty"`
	Identity       *EndpointIdentity   `json:"identity,omitempty"`
	Networking     *EndpointNetworking `json:"networking,omitempty"`
	Encryption     EncryptionSpec      `json:"encryption,omitempty"`
	Policy         *EndpointPolicy     `json:"policy,omitempty"`
	State          string              `json:"state,omitempty"`
	NamedPorts     []NamedPort         `json:"named-ports,omitempty"`
	ServiceAccount string              `json:"service-account,omitempty"`
}

// EndpointIdentity is the endpoint's security identity and its labels.
type EndpointIdentity struct {
	ID     int64    `json:"id,omitempty"`
	Labels []string `json:"labels,omitempty"`
}

// EndpointNetworking is where the endpoint is reachable.
type EndpointNetworking struct {
	Addressing AddressPairList `json:"addressing"`
	NodeIP     string          `json:"node,omitempty"`
}

// AddressPair is an endpoint's IPv4 and IPv6 address.
type AddressPair struct {
	IPV4 string `json:"ipv4,omitempty"`
	IPV6 string `json:"ipv6,omitempty"`
}

// AddressPairList is a list of address pairs.
type AddressPairList []*AddressPair

// EncryptionSpec names the encryption key in use (0 means none).
type EncryptionSpec struct {
	Key int `json:"key,omitempty"`
}

// NamedPort is a named container port of the endpoint.
type NamedPort struct {
	Name     string `json:"name,omitempty"`
	Port     uint16 `json:"port,omitempty"`
	Protocol string `json:"protocol,omitempty"`
}

// EndpointPolicy is the endpoint's policy state per direction.
type EndpointPolicy struct {
	Ingress *EndpointPolicyDirection `json:"ingress,omitempty"`
	Egress  *EndpointPolicyDirection `json:"egress,omitempty"`
}

// EndpointPolicyDirection is whether policy is enforced in one direction.
type EndpointPolicyDirection struct {
	Enforcing bool   `json:"enforcing"`
	State     string `json:"state,omitempty"`
}
