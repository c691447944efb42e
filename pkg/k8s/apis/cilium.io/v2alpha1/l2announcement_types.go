package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// L2AnnounceLoadBalancerClass is the loadBalancerClass of Services whose
// addresses only L2 announcements make reachable; LB-IPAM serves it when
// the agents announce.
const L2AnnounceLoadBalancerClass = "io.cilium/l2-announcer"

// CiliumL2AnnouncementPolicy says which nodes answer ARP for which
// Services' addresses, on which of their devices. It is cluster-scoped.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumL2AnnouncementPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   CiliumL2AnnouncementPolicySpec   `json:"spec,omitempty"`
	Status CiliumL2AnnouncementPolicyStatus `json:"status,omitempty"`
}

// CiliumL2AnnouncementPolicySpec selects Services, nodes and devices.
type CiliumL2AnnouncementPolicySpec struct {
	// NodeSelector selects the nodes that may announce, by their labels;
	// none selects every node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// ServiceSelector selects the Services announced, by their labels
	// and the io.kubernetes.service.namespace and
	// io.kubernetes.service.name labels every Service has for it; none
	// selects every Service. A Service whose loadBalancerClass is set to
	// another than io.cilium/l2-announcer is not announced.
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`
	// LoadBalancerIPs: announce the Services' status.loadBalancer
	// addresses.
	LoadBalancerIPs bool `json:"loadBalancerIPs,omitempty"`
	// ExternalIPs: announce the Services' spec.externalIPs.
	ExternalIPs bool `json:"externalIPs,omitempty"`
	// Interfaces are regular expressions matched against the names of
	// the devices the datapath serves, unanchored as in Cilium (anchor
	// them: "^eth[0-9]+$"); none matches every device.
	Interfaces []string `json:"interfaces,omitempty"`
}

// CiliumL2AnnouncementPolicyStatus holds the policy's conditions: the
// agents set io.cilium/bad-service-selector, io.cilium/bad-node-selector
// and io.cilium/bad-interface-regex True, naming the field, when they
// cannot use a part of it.
type CiliumL2AnnouncementPolicyStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CiliumL2AnnouncementPolicyList is a list of CiliumL2AnnouncementPolicy.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumL2AnnouncementPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumL2AnnouncementPolicy `json:"items"`
}
