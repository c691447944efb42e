// Command pause waits for SIGTERM or SIGINT and exits 0: the /usr/bin/pause that
// quay.io/cilium/alpine-curl carries (from registry.k8s.io/pause), which Cilium's
// connectivity test runs in its client pods.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
