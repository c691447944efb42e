// Command cilium-agent runs on every node: it owns the node's endpoints,
// addresses and eBPF datapath and serves the REST API that cilium-cni and
// cilium-dbg use. cells.go lists what it is made of.
package main

import (
	"os"
)

func main() {
	if err := newCommand(Infrastructure, ControlPlane, Datapath, Observability, Started).Execute(); err != nil {
		os.Exit(1)
	}
}
