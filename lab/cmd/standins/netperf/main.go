// Command netperf is the client of the lab's quay.io/cilium/network-perf (see
// lab/internal/standins/netperf): it measures against the lab's netserver only.
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/netperf"
)

func main() { os.Exit(netperf.NetperfMain(os.Args[1:], os.Stdout, os.Stderr)) }
