package main

import (
	"log/slog"
	"os"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/spf13/cobra"

	install "github.com/cilium-go/cilium/install/kubernetes"
	"github.com/cilium-go/cilium/pkg/health"
)

// newHive assembles the agent from cells; level is the log level that
// PATCH /v1/config changes.
func newHive(level *slog.LevelVar, cells ...cell.Cell) *hive.Hive {
	all := append([]cell.Cell{cell.Provide(func() *slog.LevelVar { return level })}, cells...)
	return health.NewHive(all...)
}

func newCommand(cells ...cell.Cell) *cobra.Command {
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return install.HiveCommand("cilium-agent", "Run the cilium-go agent of this node", newHive(level, cells...), log)
}
