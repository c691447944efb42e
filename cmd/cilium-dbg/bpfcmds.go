package main

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// ipcacheValue is an ipcache entry as Cilium's cilium-dbg prints one;
// cilium-cli parses identity=, encryptkey= and tunnelendpoint=.
func ipcacheValue(e spec.IPCacheEntry) string {
	tunnel := netip.IPv4Unspecified()
	if e.TunnelEndpoint.IsValid() {
		tunnel = e.TunnelEndpoint
	}
	return fmt.Sprintf("identity=%d encryptkey=0 tunnelendpoint=%s flags=<none>", e.Identity, tunnel)
}

func newIPCacheGetCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "get <ip>",
		Short: "The identity of an address: the ipcache's longest prefix that holds it",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ip, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("ip %q: not an IP address (want dotted decimal, 192.168.1.1, or IPv6, feab::f02b)", args[0])
			}
			ip = ip.Unmap()
			return o.withMaps(func(m *datapath.Maps) error {
				entries, err := m.IPCacheEntries()
				if err != nil {
					return err
				}
				best, found := netip.Prefix{}, false
				for p := range entries {
					if p.Contains(ip) && (!found || p.Bits() > best.Bits()) {
						best, found = p, true
					}
				}
				if !found {
					return fmt.Errorf("%s does not map to any identity", args[0])
				}
				_, err = fmt.Fprintf(o.out, "%s maps to identity %s\n", args[0], ipcacheValue(entries[best]))
				return err
			})
		},
	}
}

func newIPCacheMatchCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "match <prefix>",
		Short: "The ipcache's entry of exactly this prefix",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := netip.ParsePrefix(args[0])
			if err != nil {
				return fmt.Errorf("prefix %q: not a prefix (want address/length, 10.0.0.0/24)", args[0])
			}
			return o.withMaps(func(m *datapath.Maps) error {
				entries, err := m.IPCacheEntries()
				if err != nil {
					return err
				}
				e, ok := entries[p]
				if !ok {
					return fmt.Errorf("%s does not match to any ipcache entry", args[0])
				}
				_, err = fmt.Fprintf(o.out, "key %s has value %q\n", p, ipcacheValue(e))
				return err
			})
		},
	}
}

// ipcacheWriteNote is why writes by hand do not last.
const ipcacheWriteNote = `The agent owns the ipcache: its reconciler puts back what it wants there at
its next refresh. Writing by hand is for debugging and for tests that take an
entry away for a while (cilium-cli's pod-to-pod-missing-ipcache).`

func newIPCacheDeleteCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <prefix>",
		Short: "Delete the ipcache's entry of exactly this prefix",
		Long:  "Delete the ipcache's entry of exactly this prefix.\n\n" + ipcacheWriteNote,
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := netip.ParsePrefix(args[0])
			if err != nil || !p.Addr().Is4() {
				return fmt.Errorf("prefix %q: not an IPv4 prefix (want address/length, 10.0.0.0/24)", args[0])
			}
			return o.withMaps(func(m *datapath.Maps) error {
				entries, err := m.IPCacheEntries()
				if err != nil {
					return err
				}
				if _, ok := entries[p]; !ok {
					return fmt.Errorf("%s does not match to any ipcache entry", args[0])
				}
				return m.DeleteIPCache(p)
			})
		},
	}
}

func newIPCacheUpdateCommand(o *options) *cobra.Command {
	var id, cidrID, encryptKey uint32
	var tunnel string
	cmd := &cobra.Command{
		Use:   "update <prefix> --identity <id> [--tunnelendpoint <ip>]",
		Short: "Write the ipcache's entry of a prefix",
		Long:  "Write the ipcache's entry of a prefix: its identity and, behind a tunnel, the node's address.\n\n" + ipcacheWriteNote,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := netip.ParsePrefix(args[0])
			if err != nil || !p.Addr().Is4() || p != p.Masked() {
				return fmt.Errorf("prefix %q: not an IPv4 prefix without host bits (want address/length, 10.0.0.0/24)", args[0])
			}
			if !cmd.Flags().Changed("identity") || id == 0 {
				return errors.New("--identity: required, a number from 1")
			}
			if encryptKey != 0 {
				return fmt.Errorf("--encryptkey %d: cilium-go has no encryption; want 0", encryptKey)
			}
			e := spec.IPCacheEntry{Identity: identity.NumericIdentity(id), CIDRIdentity: identity.NumericIdentity(cidrID)}
			if tunnel != "" && tunnel != "0.0.0.0" && tunnel != "<nil>" {
				if e.TunnelEndpoint, err = netip.ParseAddr(tunnel); err != nil || !e.TunnelEndpoint.Is4() {
					return fmt.Errorf("--tunnelendpoint %q: not an IPv4 address", tunnel)
				}
			}
			return o.withMaps(func(m *datapath.Maps) error { return m.UpsertIPCache(p, e) })
		},
	}
	fs := cmd.Flags()
	fs.Uint32Var(&id, "identity", 0, "the prefix's security identity")
	fs.StringVar(&tunnel, "tunnelendpoint", "", "the address of the node behind a tunnel; empty or 0.0.0.0: none")
	fs.Uint32Var(&encryptKey, "encryptkey", 0, "Cilium's encryption key index; cilium-go takes only 0")
	fs.Uint32Var(&cidrID, "cidr-identity", 0, "the ipBlock prefix's identity judged beside --identity; 0: none")
	return cmd
}

func newCTFlushCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "flush [global | <endpoint-id>]",
		Short: "Delete connection tracking entries: all of them, or an endpoint's",
		Long: `Delete connection tracking entries: all of them (no argument, or global), or
those to and from an endpoint's address (its numeric id). The connections lose
their state: their next packets are judged by policy as new ones.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var epID uint16
			if len(args) == 1 && args[0] != "global" {
				id, err := strconv.ParseUint(args[0], 10, 16)
				if err != nil || id == 0 {
					return fmt.Errorf("endpoint %q: want global or an endpoint id from 1 to 65535", args[0])
				}
				epID = uint16(id)
			}
			return o.withMaps(func(m *datapath.Maps) error {
				var match func(netip.Addr) bool
				if epID != 0 {
					eps, err := m.EndpointEntries()
					if err != nil {
						return err
					}
					var addr netip.Addr
					for _, e := range eps {
						if e.ID == epID {
							addr = e.IPv4
						}
					}
					if !addr.IsValid() {
						return fmt.Errorf("endpoint %d: not in the datapath's endpoints", epID)
					}
					match = func(a netip.Addr) bool { return a == addr }
				}
				n, err := m.FlushConntrack(match)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(o.out, "Flushed %d entries from %s\n", n, filepath.Join(o.bpfRoot, "maps", "cilium_ct4"))
				return err
			})
		},
	}
}
