package main

import (
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
)

// ciliumVersion is Cilium's version struct: Cilium's tools read
// Daemon.Version (cilium-cli: version -o jsonpath={$.Daemon.Version}).
type ciliumVersion struct {
	Version          string
	Revision         string
	GoRuntimeVersion string
	Arch             string
}

// versions is the output of version: this tool's and the agent's.
type versions struct {
	Client ciliumVersion
	Daemon ciliumVersion
}

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "The Cilium version whose API cilium-go speaks, with cilium-go's revision",
		Long: `The Cilium version whose API and tools cilium-go speaks (` + ciliumapi.Version + `), with
cilium-go's revision, for this tool and the agent. The agent is built from the
same tree, so its version is this tool's once it answers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			v := thisVersion()
			// The agent must answer for its version to be told.
			if _, err := o.client().Config(ctx); err != nil {
				return err
			}
			out := versions{Client: v, Daemon: v}
			return o.render(out, func(w *tabwriter.Writer) {
				row(w, "Client:", v.Version, v.Revision, v.GoRuntimeVersion, v.Arch)
				row(w, "Daemon:", v.Version, v.Revision, v.GoRuntimeVersion, v.Arch)
			})
		},
	}
}

func thisVersion() ciliumVersion {
	v := ciliumVersion{Version: ciliumapi.Version + "-cilium-go", GoRuntimeVersion: runtime.Version(), Arch: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				v.Revision = s.Value
			}
		}
	}
	return v
}
