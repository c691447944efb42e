package main

import (
	"context"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
)

func newEndpointCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "endpoint", Short: "The node's endpoints, from the agent"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the node's endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			eps, err := o.client().Endpoints(ctx)
			if err != nil {
				return err
			}
			var out []*cm.Endpoint
			if o.structured() {
				// Cilium's endpoints carry their policy status, which the
				// list of ours does not: cilium-cli waits for its revision.
				if out, err = o.ciliumEndpoints(ctx, eps); err != nil {
					return err
				}
			}
			return o.render(out, func(w *tabwriter.Writer) {
				row(w, "ID", "IDENTITY", "IPV4", "POD", "CONTAINER", "HOST IF", "STATE")
				for _, e := range eps {
					row(w, e.ID, e.Identity, e.IPv4, podName(e), shortID(e.ContainerID), e.HostIfName, e.State)
				}
			})
		},
	}, &cobra.Command{
		Use:   "get <id|container-id>",
		Short: "Show one endpoint and its policy, by numeric id or container id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			e, err := o.getEndpoint(ctx, args[0])
			if err != nil {
				return err
			}
			// Cilium prints the endpoint in a list of one.
			return o.render([]*cm.Endpoint{ciliumapi.Endpoint(e)}, func(w *tabwriter.Writer) {
				row(w, "ID:", e.ID)
				row(w, "Container:", e.ContainerID)
				row(w, "Pod:", podName(e))
				row(w, "Identity:", e.Identity)
				row(w, "IPv4:", e.IPv4)
				row(w, "MAC:", e.MAC)
				row(w, "Interface:", orDash(e.IfName))
				row(w, "Host interface:", e.HostIfName+" (ifindex "+strconv.Itoa(e.HostIfindex)+")")
				row(w, "Netns:", e.NetNSPath)
				row(w, "State:", e.State)
				row(w, "Created:", e.Created.Format("2006-01-02T15:04:05Z07:00"))
				endpointPolicyTable(w, e.Policy)
			})
		},
	})
	return cmd
}

// ciliumEndpoints are eps with their policies, in Cilium's model. An
// endpoint deleted meanwhile is left out.
func (o *options) ciliumEndpoints(ctx context.Context, eps []models.Endpoint) ([]*cm.Endpoint, error) {
	out := make([]*cm.Endpoint, 0, len(eps))
	for _, e := range eps {
		full, err := o.client().GetEndpointByID(ctx, e.ID)
		if client.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ciliumapi.Endpoint(full))
	}
	return out, nil
}

// getEndpoint takes a numeric endpoint id, container-id:<id> or a bare
// container id: container ids are long hex strings, never a number below
// 4096.
func (o *options) getEndpoint(ctx context.Context, arg string) (models.Endpoint, error) {
	if id, err := strconv.ParseUint(arg, 10, 16); err == nil {
		return o.client().GetEndpointByID(ctx, uint16(id))
	}
	return o.client().GetEndpoint(ctx, strings.TrimPrefix(arg, models.ContainerIDPrefix))
}

func podName(e models.Endpoint) string {
	if e.PodName == "" {
		return "-"
	}
	return e.PodNamespace + "/" + e.PodName
}

// shortID is the first 12 characters of a container id, as container
// runtimes print them.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return orDash(id)
}
