package kubernetes

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/hive"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ConfigDirFlag is the flag of cilium-agent and cilium-operator that names
// the directory ApplyConfigDir reads: where the pods mount cilium-config.
const ConfigDirFlag = "config-dir"

// HiveCommand is the command line of a daemon made of hive cells, as
// cilium-agent and cilium-operator are: the cells' flags and --config-dir,
// applied before h runs, and hive's own subcommands.
func HiveCommand(use, short string, h *hive.Hive, log *slog.Logger) *cobra.Command {
	var dir *string
	cmd := &cobra.Command{
		Use:          use,
		Short:        short,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ApplyConfigDir(cmd.Flags(), *dir); err != nil {
				return err
			}
			return h.Run(log)
		},
	}
	h.RegisterFlags(cmd.Flags())
	dir = cmd.Flags().String(ConfigDirFlag, "",
		"directory of files named after flags, each holding its flag's value (a mounted ConfigMap); flags on the command line win")
	cmd.AddCommand(h.Command())
	return cmd
}

// ApplyConfigDir sets every flag of fs named by a file in dir to the file's
// content, unless the command line set it. Hive binds its flags to viper,
// so the cells see these values as if they had been given as flags.
//
// Names starting with a dot are skipped: a mounted ConfigMap keeps its
// versions in dot directories and its keys are symlinks into them. A file
// naming no flag is an error, so a misspelt key does not go unnoticed.
// An empty dir does nothing.
func ApplyConfigDir(fs *pflag.FlagSet, dir string) error {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--%s: %w", ConfigDirFlag, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		// Stat follows the key's symlink; the entry would describe the link.
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("--%s: %w", ConfigDirFlag, err)
		}
		if st.IsDir() {
			continue
		}
		f := fs.Lookup(name)
		if f == nil || name == ConfigDirFlag {
			return fmt.Errorf("--%s: %s names no flag", ConfigDirFlag, path)
		}
		if f.Changed {
			continue
		}
		value, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--%s: %w", ConfigDirFlag, err)
		}
		if err := fs.Set(name, strings.TrimSpace(string(value))); err != nil {
			return fmt.Errorf("--%s: %s: %w", ConfigDirFlag, path, err)
		}
	}
	return nil
}
