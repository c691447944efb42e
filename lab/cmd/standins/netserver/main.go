// Command netserver is the server of the lab's quay.io/cilium/network-perf (see
// lab/internal/standins/netperf).
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/netperf"
)

func main() { os.Exit(netperf.NetserverMain(os.Args[1:], os.Stdout, os.Stderr)) }
