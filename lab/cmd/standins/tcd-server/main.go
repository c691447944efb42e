// Command tcd-server is the server of the lab's quay.io/cilium/test-connection-disruption
// (see lab/internal/standins/tcd).
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/tcd"
)

func main() { os.Exit(tcd.ServerMain(os.Args[1:], os.Stdout, os.Stderr)) }
