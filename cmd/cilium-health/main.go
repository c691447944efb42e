// Command cilium-health reads the agent's health API (health.sock), as
// Cilium's cilium-health does: the reachability of every node and health
// endpoint (status), and the local agent's health (get).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}
