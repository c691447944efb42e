// Package k8s turns Kubernetes' policy objects into the policy engine's
// rules: NetworkPolicies (FromNetworkPolicy), CiliumNetworkPolicies and
// CiliumClusterwideNetworkPolicies (FromCNP, FromCCNP), reading the
// Services that toServices name and the CiliumCIDRGroups that CIDR rules
// name (Cluster). It also tells a policy's author what the agents made
// of it (Reporter): warning events, and the status of Cilium's policies.
package k8s
