package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/pkg/api/client"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/paths"
)

// options are the global flags, shared by every command.
type options struct {
	socket  string
	bpfRoot string
	output  string
	out     io.Writer
}

const (
	outputTable = "table"
	outputJSON  = "json"
)

func newRootCommand(out io.Writer) *cobra.Command {
	o := &options{out: out}
	root := &cobra.Command{
		Use:               "cilium-dbg",
		Short:             "Inspect the cilium-go agent and datapath of this node",
		SilenceUsage:      true,
		SilenceErrors:     false,
		PersistentPreRunE: func(*cobra.Command, []string) error { return o.checkOutput() },
	}
	root.SetOut(out)
	fs := root.PersistentFlags()
	fs.StringVar(&o.socket, "socket-path", paths.DefaultConfig.SocketPath, "the agent's API socket")
	fs.StringVar(&o.bpfRoot, "bpf-root", paths.DefaultConfig.BPFRoot, "the agent's bpffs directory (its --bpf-root), for bpf and monitor")
	fs.StringVarP(&o.output, "output", "o", outputTable, "output format: table, json (in Cilium's API models) or jsonpath=TEMPLATE")
	root.AddCommand(newStatusCommand(o), newEndpointCommand(o), newIdentityCommand(o), newNodeCommand(o), newServiceCommand(o),
		newPolicyCommand(o), newBPFCommand(o), newMonitorCommand(o), newMetricsCommand(o), newVersionCommand(o), newFQDNCommand(o))
	return root
}

func (o *options) client() *client.Client { return client.New(o.socket) }

// openMaps opens the pinned maps without creating any.
func (o *options) openMaps() (*datapath.Maps, error) {
	dir := filepath.Join(o.bpfRoot, "maps")
	m, err := datapath.OpenPinnedMaps(dir)
	if errors.Is(err, datapath.ErrNotPinned) {
		return nil, fmt.Errorf("%w (is the agent's datapath started, and is --bpf-root its --bpf-root?)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("open pinned maps in %s: %w", dir, err)
	}
	return m, nil
}

// withMaps runs f on the pinned maps and closes them again.
func (o *options) withMaps(f func(*datapath.Maps) error) error {
	m, err := o.openMaps()
	if err != nil {
		return err
	}
	defer m.Close()
	return f(m)
}

// isStatus reports whether err is the agent's answer with HTTP status code.
func isStatus(err error, code int) bool {
	var e *models.Error
	return errors.As(err, &e) && e.Code == code
}
