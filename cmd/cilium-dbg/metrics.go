package main

import (
	"fmt"
	"regexp"
	"strconv"
	"text/tabwriter"

	cm "github.com/cilium/cilium/api/v1/models"
	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
)

func newMetricsCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "metrics", Short: "The agent's metrics"}
	var pattern string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agent's metrics, a line per sample",
		Long: `List the agent's metrics, a line per sample. --match-pattern (-p) keeps the
samples whose name followed by their labels (k=v, space-separated) the regular
expression matches. -o json prints a list of Cilium's Metric model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var re *regexp.Regexp
			if pattern != "" {
				var err error
				if re, err = regexp.Compile(pattern); err != nil {
					return fmt.Errorf("--match-pattern %q: %w", pattern, err)
				}
			}
			ctx, cancel := apiContext(cmd)
			defer cancel()
			var all []*cm.Metric
			if err := o.client().Get(ctx, "/v1/metrics/", &all); err != nil {
				return err
			}
			out := []*cm.Metric{}
			for _, m := range all {
				if re == nil || re.MatchString(m.Name+ciliumapi.LabelString(m.Labels)) {
					out = append(out, m)
				}
			}
			return o.render(out, func(w *tabwriter.Writer) {
				row(w, "Metric", "Labels", "Value")
				for _, m := range out {
					row(w, m.Name, ciliumapi.LabelString(m.Labels), strconv.FormatFloat(m.Value, 'f', 6, 64))
				}
			})
		},
	}
	list.Flags().StringVarP(&pattern, "match-pattern", "p", "", "show only the metrics whose name and labels match this regular expression")
	cmd.AddCommand(list)
	return cmd
}
