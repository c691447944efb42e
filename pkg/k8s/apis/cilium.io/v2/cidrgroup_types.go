package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/policy/api"
)

// CiliumCIDRGroup names a set of prefixes outside the cluster, so that
// policies' CIDR rules can refer to all of them at once (cidrGroupRef by
// name, cidrGroupSelector by the group's labels). It is cluster-scoped.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumCIDRGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec CiliumCIDRGroupSpec `json:"spec"`
}

// CiliumCIDRGroupSpec lists the group's prefixes.
type CiliumCIDRGroupSpec struct {
	// ExternalCIDRs are prefixes ("192.0.2.0/24") of peers outside the
	// cluster.
	ExternalCIDRs []api.CIDR `json:"externalCIDRs"`
}

// CiliumCIDRGroupList is a list of CiliumCIDRGroup.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumCIDRGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumCIDRGroup `json:"items"`
}
