package main

import (
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newFQDNCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "fqdn", Short: "What toFQDNs policies learned from allowed DNS answers"}
	cache := &cobra.Command{Use: "cache", Short: "The agent's cache of names and their addresses"}
	var endpoint, pattern, cidr, source string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the cache: the addresses each endpoint learned for each name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"matchpattern": pattern, "cidr": cidr, "source": source} {
				if v != "" {
					q.Set(k, v)
				}
			}
			ctx, cancel := apiContext(cmd)
			defer cancel()
			lookups, err := o.client().FQDNCache(ctx, endpoint, q)
			if err != nil {
				return err
			}
			return o.render(lookups, func(w *tabwriter.Writer) {
				row(w, "Endpoint", "Source", "FQDN", "TTL", "ExpirationTime", "IPs")
				for _, l := range lookups {
					row(w, l.EndpointID, l.Source, l.Fqdn, l.TTL, l.ExpirationTime, strings.Join(l.Ips, ","))
				}
			})
		},
	}
	fs := list.Flags()
	fs.StringVarP(&endpoint, "endpoint", "e", "", "only this endpoint's (its id)")
	fs.StringVarP(&pattern, "matchpattern", "p", "", "only names this toFQDNs pattern matches")
	fs.StringVarP(&cidr, "cidr", "c", "", "only lookups with an address in this prefix")
	fs.StringVarP(&source, "source", "s", "", "only lookups of this source: lookup or connection")
	cache.AddCommand(list)
	cmd.AddCommand(cache)
	return cmd
}
