package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newGetCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:     "get",
		Aliases: []string{"inspect", "show"},
		Short:   "Display local cilium agent status",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hr, err := o.client().Healthz(cmd.Context())
			if err != nil {
				return err
			}
			if o.output == "json" {
				return o.printJSON(hr)
			}
			w := tabwriter.NewWriter(o.out, 2, 0, 3, ' ', 0)
			fmt.Fprintf(w, "Daemon uptime:\t%s\n", hr.Uptime)
			if l := hr.SystemLoad; l != nil {
				fmt.Fprintf(w, "Node load:\t%s %s %s\n", l.Last1min, l.Last5min, l.Last15min)
			}
			if s := hr.Cilium.Cilium; s != nil {
				fmt.Fprintf(w, "Cilium:\t%s\t%s\n", s.State, s.Msg)
			}
			return w.Flush()
		},
	}
	o.addOutput(c)
	return c
}
