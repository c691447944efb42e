// Command cilium-cni is the CNI 1.1 plugin of cilium-go; pkg/cni holds
// what it does.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cilium-go/cilium/pkg/cni"
)

func main() {
	skel.PluginMainFuncs(cni.New().Funcs(),
		version.PluginSupports("0.4.0", "1.0.0", "1.1.0"), "cilium-cni: the CNI plugin of cilium-go")
}
