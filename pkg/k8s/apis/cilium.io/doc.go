// Package ciliumio holds the name of Cilium's Kubernetes API group; the
// versioned types are in v2 and v2alpha1.
package ciliumio

// GroupName is the API group of every Cilium custom resource.
const GroupName = "cilium.io"
