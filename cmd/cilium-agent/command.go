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
	opts := hive.DefaultOptions()
	opts.ModulePrivateProviders = health.ModuleProviders
	all := append([]cell.Cell{cell.Provide(func() *slog.LevelVar { return level })}, cells...)
	return hive.NewWithOptions(opts, all...)
}

func newCommand(cells ...cell.Cell) *cobra.Command {
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	h := newHive(level, cells...)
	var applyConfigDir func() error
	cmd := &cobra.Command{
		Use:          "cilium-agent",
		Short:        "Run the cilium-go agent of this node",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := applyConfigDir(); err != nil {
				return err
			}
			return h.Run(log)
		},
	}
	h.RegisterFlags(cmd.Flags())
	applyConfigDir = install.AddConfigDirFlag(cmd.Flags())
	cmd.AddCommand(h.Command())
	return cmd
}
