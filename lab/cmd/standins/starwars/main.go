// Command starwars is the lab's quay.io/cilium/starwars: the deathstar of
// Cilium's getting-started demo (see lab/internal/standins/starwars).
package main

import (
	"os"

	"github.com/cilium-go/cilium/lab/internal/standins/starwars"
)

func main() { os.Exit(starwars.Main(os.Args[1:], os.Stderr)) }
