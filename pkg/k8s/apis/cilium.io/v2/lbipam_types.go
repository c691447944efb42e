package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CiliumLoadBalancerIPPool is a pool of addresses that LB-IPAM hands out
// to LoadBalancer Services, with Cilium's fields. It is cluster-scoped.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumLoadBalancerIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   CiliumLoadBalancerIPPoolSpec   `json:"spec,omitempty"`
	Status CiliumLoadBalancerIPPoolStatus `json:"status,omitempty"`
}

// CiliumLoadBalancerIPPoolSpec says which addresses the pool holds and
// which Services it serves.
type CiliumLoadBalancerIPPoolSpec struct {
	// ServiceSelector selects the Services the pool serves, by their
	// labels and the io.kubernetes.service.namespace and
	// io.kubernetes.service.name labels every Service has for it; none
	// selects every Service.
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`
	// AllowFirstLastIPs: "Yes" or unset, a CIDR's first and last
	// addresses are handed out; "No", they are not (a /31 or /32 keeps
	// them all the same).
	AllowFirstLastIPs AllowFirstLastIPType `json:"allowFirstLastIPs,omitempty"`
	// Blocks are the pool's addresses: CIDRs, or ranges from start to
	// stop (stop unset: start alone).
	Blocks []CiliumLoadBalancerIPPoolIPBlock `json:"blocks,omitempty"`
	// Disabled: the pool hands out no new address; those it handed out
	// stay.
	Disabled bool `json:"disabled,omitempty"`
}

// AllowFirstLastIPType is "Yes" or "No".
type AllowFirstLastIPType string

// The values of AllowFirstLastIPs.
const (
	AllowFirstLastIPNo  AllowFirstLastIPType = "No"
	AllowFirstLastIPYes AllowFirstLastIPType = "Yes"
)

// AllowFirstLastIPTypes are AllowFirstLastIPs' values, for the schema.
var AllowFirstLastIPTypes = []AllowFirstLastIPType{AllowFirstLastIPYes, AllowFirstLastIPNo}

// CiliumLoadBalancerIPPoolIPBlock is a CIDR or a range of addresses.
type CiliumLoadBalancerIPPoolIPBlock struct {
	Cidr  IPv4orIPv6CIDR `json:"cidr,omitempty"`
	Start string         `json:"start,omitempty"`
	Stop  string         `json:"stop,omitempty"`
}

// IPv4orIPv6CIDR is a prefix, "198.51.100.0/24" or "2001:db8::/64".
type IPv4orIPv6CIDR string

// CiliumLoadBalancerIPPoolStatus holds the pool's conditions: its counts
// (cilium.io/IPsTotal, IPsAvailable, IPsUsed) and whether it conflicts
// with another (cilium.io/PoolConflict).
type CiliumLoadBalancerIPPoolStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CiliumLoadBalancerIPPoolList is a list of CiliumLoadBalancerIPPool.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumLoadBalancerIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumLoadBalancerIPPool `json:"items"`
}
