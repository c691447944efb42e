package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
)

func newIdentityCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "identity", Short: "Security identities in use on the node, from the agent"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the reserved identities and those of the node's endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			ids, err := o.client().Identities(ctx)
			if err != nil {
				return err
			}
			return o.render(ciliumapi.Identities(ids), func(w *tabwriter.Writer) {
				row(w, "ID", "ENDPOINTS", "LABELS")
				for _, id := range ids {
					row(w, id.ID, id.Endpoints, orDash(strings.Join(id.Labels, ",")))
				}
			})
		},
	}, &cobra.Command{
		Use:   "get <id>",
		Short: "Show one identity",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			num, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("identity %q: not a number from 0 to 4294967295", args[0])
			}
			ctx, cancel := apiContext(cmd)
			defer cancel()
			ids, err := o.client().Identities(ctx)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if uint64(id.ID) != num {
					continue
				}
				// Cilium prints the identity in a list of one.
				return o.render(ciliumapi.Identities([]models.Identity{id}), func(w *tabwriter.Writer) {
					row(w, "ID:", id.ID)
					row(w, "Endpoints:", id.Endpoints)
					row(w, "Labels:", orDash(strings.Join(id.Labels, ",")))
				})
			}
			return fmt.Errorf("identity %d: not reserved and not used by an endpoint of this node", num)
		},
	})
	return cmd
}
