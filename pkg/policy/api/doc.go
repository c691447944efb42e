// Package api holds the body of a Cilium network policy rule as users write it
// in CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy objects, with the
// JSON field names Cilium uses, and validation that names the offending field.
// Rule semantics (selector resolution, map state) live in the policy engine;
// this package is only the wire format.
//
// +k8s:deepcopy-gen=package
package api

//go:generate go tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file ../../../hack/boilerplate.go.txt .
