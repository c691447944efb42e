// Command cilium-dbg inspects the cilium-go agent of this node: its state
// through the REST API on the agent's socket, and its datapath through
// the pinned BPF maps, which works even while the agent is down.
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
