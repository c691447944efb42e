package main

import (
	"cmp"
	"slices"
	"text/tabwriter"

	cm "github.com/cilium/cilium/api/v1/models"
	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
)

func newNodeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "The cluster's nodes as the agent knows them"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the nodes, this one included",
		Long: `List the nodes, this one included, named cluster/node, in the columns of
Cilium's cilium-dbg node list (cilium-cli reads them); -o json prints Cilium's
NodeElement model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			c := o.client()
			nodes, err := c.Nodes(ctx)
			if err != nil {
				return err
			}
			cfg, err := c.Config(ctx)
			if err != nil {
				return err
			}
			out := ciliumapi.Nodes(orDefault(cfg.Flags["cluster-name"], "default"), nodes)
			slices.SortFunc(out, func(a, b *cm.NodeElement) int { return cmp.Compare(a.Name, b.Name) })
			return o.render(out, func(w *tabwriter.Writer) {
				row(w, "Name", "IPv4 Address", "Endpoint CIDR", "IPv6 Address", "Endpoint CIDR", "Source")
				for _, n := range out {
					v4 := n.PrimaryAddress.IPv4
					row(w, n.Name, v4.IP, v4.AllocRange, "", "", n.Source)
				}
			})
		},
	})
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
