// Command tcd-client is the client of the lab's quay.io/cilium/test-connection-disruption
// (see lab/internal/standins/tcd).
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/tcd"
)

func main() { os.Exit(tcd.ClientMain(os.Args[1:], os.Stdout, os.Stderr)) }
