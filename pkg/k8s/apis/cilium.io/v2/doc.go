// Package v2 holds the cilium.io/v2 custom resources: network policies,
// identities, endpoints and nodes, with Cilium's kinds and JSON field names so
// objects written for Cilium decode unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=cilium.io
package v2

//go:generate go tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file ../../../../../hack/boilerplate.go.txt .
