package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CiliumIdentity is a cluster-wide security identity. Its name is the numeric
// identity; SecurityLabels are the labels it stands for, as "source:key" ->
// value.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	SecurityLabels map[string]string `json:"security-labels"`
}

// CiliumIdentityList is a list of CiliumIdentity.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumIdentity `json:"items"`
}
