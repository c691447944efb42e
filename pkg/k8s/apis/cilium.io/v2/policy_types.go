package v2

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cilium-go/cilium/pkg/policy/api"
)

// CiliumNetworkPolicy is a namespaced policy: one rule in Spec, several in
// Specs, or both.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   *api.Rule                 `json:"spec,omitempty"`
	Specs  api.Rules                 `json:"specs,omitempty"`
	Status CiliumNetworkPolicyStatus `json:"status,omitempty"`
}

// CiliumNetworkPolicyList is a list of CiliumNetworkPolicy.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumNetworkPolicy `json:"items"`
}

// CiliumClusterwideNetworkPolicy is a policy for endpoints in every namespace
// and for nodes (nodeSelector).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumClusterwideNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   *api.Rule                 `json:"spec,omitempty"`
	Specs  api.Rules                 `json:"specs,omitempty"`
	Status CiliumNetworkPolicyStatus `json:"status,omitempty"`
}

// CiliumClusterwideNetworkPolicyList is a list of CiliumClusterwideNetworkPolicy.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CiliumClusterwideNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []CiliumClusterwideNetworkPolicy `json:"items"`
}

// CiliumNetworkPolicyStatus is what the agents report about a policy.
type CiliumNetworkPolicyStatus struct {
	DerivativePolicies map[string]CiliumNetworkPolicyNodeStatus `json:"derivativePolicies,omitempty"`
	Conditions         []NetworkPolicyCondition                 `json:"conditions,omitempty"`
	// Nodes is each node's word on the policy where it could not enforce
	// it (Cilium's per-node status of before 1.15): the agent of a node
	// whose endpoints' policy maps the policy does not fit writes its own
	// entry, and removes it once it fits again.
	Nodes map[string]CiliumNetworkPolicyNodeStatus `json:"nodes,omitempty"`
}

// CiliumNetworkPolicyNodeStatus is one node's view of a policy.
type CiliumNetworkPolicyNodeStatus struct {
	OK          bool              `json:"ok,omitempty"`
	Error       string            `json:"error,omitempty"`
	LastUpdated metav1.Time       `json:"lastUpdated,omitempty"`
	Revision    uint64            `json:"localPolicyRevision,omitempty"`
	Enforcing   bool              `json:"enforcing,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NetworkPolicyCondition is a condition of a policy (e.g. Valid).
type NetworkPolicyCondition struct {
	Type               string                 `json:"type"`
	Status             metav1.ConditionStatus `json:"status"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime,omitempty"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
}

// Rules returns the policy's rules (Spec, then Specs), validated, with errors
// naming the field ("spec.ingress[0]..." or "specs[1].egress[0]...").
func (p *CiliumNetworkPolicy) Rules() (api.Rules, error) {
	return collectRules(p.Spec, p.Specs, false)
}

// Rules returns the policy's rules (Spec, then Specs), validated.
func (p *CiliumClusterwideNetworkPolicy) Rules() (api.Rules, error) {
	return collectRules(p.Spec, p.Specs, true)
}

func collectRules(spec *api.Rule, specs api.Rules, clusterwide bool) (api.Rules, error) {
	if spec == nil && len(specs) == 0 {
		return nil, fmt.Errorf("policy has neither spec nor specs")
	}
	var out api.Rules
	var errs field.ErrorList
	check := func(r *api.Rule, p *field.Path) {
		if r == nil {
			errs = append(errs, field.Required(p, ""))
			return
		}
		errs = append(errs, r.Validate(p)...)
		if !clusterwide && r.NodeSelector != nil {
			errs = append(errs, field.Forbidden(p.Child("nodeSelector"), "only CiliumClusterwideNetworkPolicy may select nodes"))
		}
		out = append(out, r)
	}
	if spec != nil {
		check(spec, field.NewPath("spec"))
	}
	for i, r := range specs {
		check(r, field.NewPath("specs").Index(i))
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return out, nil
}
