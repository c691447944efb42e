package main

import (
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/api/models"
)

func newNodeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "The cluster's nodes as the agent knows them"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the nodes, this one included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			nodes, err := o.client().Nodes(ctx)
			if err != nil {
				return err
			}
			if nodes == nil {
				nodes = []models.Node{}
			}
			return o.render(nodes, func(w *tabwriter.Writer) {
				row(w, "NAME", "IPV4", "POD CIDR", "LOCAL")
				for _, n := range nodes {
					row(w, n.Name, n.IPv4, orDash(n.PodCIDR), n.Local)
				}
			})
		},
	})
	return cmd
}
