// Command json-mock is the lab's quay.io/cilium/json-mock: json-server with the
// image's database and middleware (see lab/internal/standins/jsonmock).
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/jsonmock"
)

func main() { os.Exit(jsonmock.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }
