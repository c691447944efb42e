package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/healthcheck/client"
)

type options struct {
	host   string
	output string
	out    io.Writer
}

func newRootCommand(out io.Writer) *cobra.Command {
	o := &options{out: out}
	root := &cobra.Command{
		Use:          "cilium-health",
		Short:        "Cilium Health Client",
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if o.output != "" && o.output != "json" {
				return fmt.Errorf("--output %q: want json", o.output)
			}
			return nil
		},
	}
	root.SetOut(out)
	host := os.Getenv(client.SocketEnv)
	if host == "" {
		host = client.DefaultSocket
	}
	fs := root.PersistentFlags()
	fs.StringVarP(&o.host, "host", "H", host, "the health API: a unix socket path or unix:// URI ($"+client.SocketEnv+")")
	root.AddCommand(newStatusCommand(o), newGetCommand(o))
	return root
}

func (o *options) client() *client.Client {
	return client.New(strings.TrimPrefix(o.host, "unix://"))
}

// addOutput is -o/--output, on the commands that print models.
func (o *options) addOutput(c *cobra.Command) {
	c.Flags().StringVarP(&o.output, "output", "o", "", "json: print the API's JSON")
}

func (o *options) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.out, "%s\n", b)
	return err
}
