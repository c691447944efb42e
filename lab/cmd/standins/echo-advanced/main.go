// Command echo-advanced is the lab's gcr.io/k8s-staging-gateway-api/echo-advanced:
// Istio's echo server, as much of it as cilium-cli's connectivity test uses
// (see lab/internal/standins/echo).
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/echo"
)

func main() { os.Exit(echo.Main(os.Args[1:], os.Stdout, os.Stderr)) }
