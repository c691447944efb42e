// Command hubble shows the flows of a cilium-go node through Hubble's
// gRPC API, with the commands, flags and output formats of Hubble's own
// CLI: observe, status, list namespaces and nodes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	relaypb "github.com/cilium/cilium/api/v1/relay"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// defaultServer is the agent's socket, as Hubble's.
const defaultServer = "unix:///var/run/cilium/hubble.sock"

type globals struct {
	server  string
	timeout time.Duration
	tls     tlsFlags
	out     io.Writer
}

func newRootCommand(out io.Writer) *cobra.Command {
	g := &globals{out: out}
	root := &cobra.Command{
		Use:           "hubble",
		Short:         "Show the flows of cilium-go nodes through Hubble's API",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.PersistentFlags().StringVar(&g.server, "server", defaultServer,
		"address of the Hubble API: unix:///path for a node's socket, host:port, or tls://host:port")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 5*time.Second, "how long to wait for the connection")
	g.tls.register(root.PersistentFlags())
	root.SetOut(out)
	root.AddCommand(newObserveCommand(g), newStatusCommand(g), newListCommand(g))
	return root
}

// dial connects to the server: in plaintext (the agent's socket), or
// with TLS as the --tls flags say (a relay). It waits up to --timeout
// for the connection, as Hubble's CLI does, so that a server that
// refuses it (a missing client certificate) is an error that says why,
// not a wait for ever.
func (g *globals) dial(ctx context.Context) (observer.ObserverClient, func() error, error) {
	creds, target, err := g.tls.credentials(g.server)
	if err != nil {
		return nil, nil, err
	}
	if !strings.Contains(target, "://") {
		target = "passthrough:///" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, fmt.Errorf("--server %q: %w", g.server, err)
	}
	c := observer.NewObserverClient(conn)
	if err := g.connect(ctx, conn, c); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return c, conn.Close, nil
}

func (g *globals) connect(ctx context.Context, conn *grpc.ClientConn, c observer.ObserverClient) error {
	wait, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if conn.WaitForStateChange(wait, s) {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// gRPC keeps why the connection failed for the calls that do not
		// wait for it: ask one.
		probe, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := c.ServerStatus(probe, &observer.ServerStatusRequest{})
		if err == nil {
			return nil
		}
		return fmt.Errorf("connect to %s within %s: %w", g.server, g.timeout, err)
	}
	return nil
}

// unary runs one call against the server within --timeout.
func (g *globals) unary(ctx context.Context, call func(context.Context, observer.ObserverClient) error) error {
	c, closeConn, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return call(ctx, c)
}

func newStatusCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the server's health and how many flows it holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st *observer.ServerStatusResponse
			err := g.unary(cmd.Context(), func(ctx context.Context, c observer.ObserverClient) (err error) {
				st, err = c.ServerStatus(ctx, &observer.ServerStatusRequest{}, grpc.WaitForReady(true))
				return err
			})
			if err != nil {
				return fmt.Errorf("server status of %s: %w", g.server, err)
			}
			fmt.Fprintln(g.out, "Healthcheck (via "+g.server+"): Ok")
			fmt.Fprintf(g.out, "Current/Max Flows: %d/%d (%.2f%%)\n", st.GetNumFlows(), st.GetMaxFlows(),
				100*float64(st.GetNumFlows())/float64(max(st.GetMaxFlows(), 1)))
			fmt.Fprintf(g.out, "Flows/s: %.2f\n", st.GetFlowsRate())
			if n := st.GetNumConnectedNodes(); n != nil {
				fmt.Fprintf(g.out, "Connected Nodes: %d/%d\n", n.GetValue(), n.GetValue()+st.GetNumUnavailableNodes().GetValue())
			}
			for _, u := range st.GetUnavailableNodes() {
				fmt.Fprintln(g.out, "Unavailable Node:", u)
			}
			return nil
		},
	}
}

func newListCommand(g *globals) *cobra.Command {
	list := &cobra.Command{Use: "list", Short: "List what the server knows"}
	list.AddCommand(&cobra.Command{
		Use:   "namespaces",
		Short: "The namespaces of the pods in the last hour's flows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *observer.GetNamespacesResponse
			err := g.unary(cmd.Context(), func(ctx context.Context, c observer.ObserverClient) (err error) {
				resp, err = c.GetNamespaces(ctx, &observer.GetNamespacesRequest{}, grpc.WaitForReady(true))
				return err
			})
			if err != nil {
				return fmt.Errorf("namespaces of %s: %w", g.server, err)
			}
			fmt.Fprintln(g.out, "NAMESPACE")
			for _, n := range resp.GetNamespaces() {
				fmt.Fprintln(g.out, n.GetNamespace())
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "nodes",
		Short: "The nodes a relay serves, and whether they answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *observer.GetNodesResponse
			err := g.unary(cmd.Context(), func(ctx context.Context, c observer.ObserverClient) (err error) {
				resp, err = c.GetNodes(ctx, &observer.GetNodesRequest{}, grpc.WaitForReady(true))
				return err
			})
			if err != nil {
				return fmt.Errorf("nodes of %s: %w", g.server, err)
			}
			printNodes(g.out, resp.GetNodes())
			return nil
		},
	})
	return list
}

var nodeStates = map[relaypb.NodeState]string{
	relaypb.NodeState_NODE_CONNECTED: "Connected", relaypb.NodeState_NODE_UNAVAILABLE: "Unavailable",
	relaypb.NodeState_NODE_GONE: "Gone", relaypb.NodeState_NODE_ERROR: "Error",
}

// printNodes writes Hubble's table of nodes.
func printNodes(out io.Writer, nodes []*observer.Node) {
	tw := tabwriter.NewWriter(out, 2, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tAGE\tFLOWS/S\tCURRENT/MAX-FLOWS")
	for _, n := range nodes {
		state, ok := nodeStates[n.GetState()]
		if !ok {
			state = "Unknown"
		}
		if n.GetState() != relaypb.NodeState_NODE_CONNECTED {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.GetName(), state, "N/A", "N/A", "N/A")
			continue
		}
		up := time.Duration(n.GetUptimeNs())
		rate := float64(n.GetSeenFlows()) / max(up.Seconds(), 1)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%d/%d (%.2f%%)\n", n.GetName(), state, up.Truncate(time.Second), rate,
			n.GetNumFlows(), n.GetMaxFlows(), 100*float64(n.GetNumFlows())/float64(max(n.GetMaxFlows(), 1)))
	}
	tw.Flush()
}
