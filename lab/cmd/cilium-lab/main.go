// Command cilium-lab runs a local Kubernetes cluster whose machines are Linux
// namespaces: the development, demo, test and benchmark ground of cilium-go.
package main

import (
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
