// Package v2alpha1 holds the cilium.io/v2alpha1 custom resources: the
// CiliumEndpointSlice that batches CiliumEndpoints of one namespace.
//
// +k8s:deepcopy-gen=package
// +groupName=cilium.io
package v2alpha1

//go:generate go tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file ../../../../../hack/boilerplate.go.txt .
