package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CiliumNode is Cilium's per-node object: the node's addresses, health
// addresses and IPAM state (the pod CIDRs the operator assigned to it).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   NodeSpec   `json:"spec"`
	Status NodeStatus `json:"status,omitempty"`
}

// CiliumNodeList is a list of CiliumNode.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumNode `json:"items"`
}

// Node address types Cilium uses.
const (
	NodeInternalIP       = "InternalIP"
	NodeExternalIP       = "ExternalIP"
	NodeCiliumInternalIP = "CiliumInternalIP"
)

// NodeAddress is one address of a node.
type NodeAddress struct {
	Type string `json:"type,omitempty"`
	IP   string `json:"ip,omitempty"`
}

// NodeSpec is the node's configuration.
type NodeSpec struct {
	InstanceID        string               `json:"instance-id,omitempty"`
	BootID            string               `json:"bootid,omitempty"`
	Addresses         []NodeAddress        `json:"addresses,omitempty"`
	HealthAddressing  HealthAddressingSpec `json:"health,omitempty"`
	IngressAddressing AddressPair          `json:"ingress,omitempty"`
	Encryption        EncryptionSpec       `json:"encryption,omitempty"`
	IPAM              IPAMSpec             `json:"ipam,omitempty"`
}

// HealthAddressingSpec is the address of the node's health endpoint.
type HealthAddressingSpec struct {
	IPv4 string `json:"ipv4,omitempty"`
	IPv6 string `json:"ipv6,omitempty"`
}

// IPAMSpec is the node's address allocation configuration. In cluster-pool
// mode the operator fills PodCIDRs.
type IPAMSpec struct {
	Pool              AllocationMap     `json:"pool,omitempty"`
	IPv6Pool          AllocationMap     `json:"ipv6-pool,omitempty"`
	PodCIDRs          []string          `json:"podCIDRs,omitempty"`
	MinAllocate       int               `json:"min-allocate,omitempty"`
	MaxAllocate       int               `json:"max-allocate,omitempty"`
	PreAllocate       int               `json:"pre-allocate,omitempty"`
	MaxAboveWatermark int               `json:"max-above-watermark,omitempty"`
	StaticIPTags      map[string]string `json:"static-ip-tags,omitempty"`
}

// AllocationMap maps an IP to its allocation.
type AllocationMap map[string]AllocationIP

// AllocationIP is who holds an IP.
type AllocationIP struct {
	Owner    string `json:"owner,omitempty"`
	Resource string `json:"resource,omitempty"`
}

// NodeStatus is the node's reported IPAM state.
type NodeStatus struct {
	IPAM IPAMStatus `json:"ipam,omitempty"`
}

// IPAMStatus is what the node's agent reports about its addresses.
type IPAMStatus struct {
	Used           AllocationMap              `json:"used,omitempty"`
	IPv6Used       AllocationMap              `json:"ipv6-used,omitempty"`
	PodCIDRs       map[string]PodCIDRMapEntry `json:"pod-cidrs,omitempty"`
	OperatorStatus OperatorStatus             `json:"operator-status,omitempty"`
	ReleaseIPs     map[string]string          `json:"release-ips,omitempty"`
	ReleaseIPv6s   map[string]string          `json:"release-ipv6s,omitempty"`
}

// PodCIDRMapEntry is the state of one pod CIDR on the node.
type PodCIDRMapEntry struct {
	Status string `json:"status,omitempty"`
}

// OperatorStatus is the operator's error for this node, if any.
type OperatorStatus struct {
	Error string `json:"error,omitempty"`
}
