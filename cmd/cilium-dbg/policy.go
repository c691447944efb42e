package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/identity"
)

func newPolicyCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Network policy as the agent's policy engine holds and judges it"}
	cmd.AddCommand(&cobra.Command{
		Use:   "get",
		Short: "List the rules the agent holds, by origin, and the policy revision",
		Long: `List the rules the agent holds, by origin, and the policy revision, which
counts the changes of the agent's policies from 1; an endpoint enforces every
change up to the policy revision of its policy status (endpoint get).
-o json prints Cilium's Policy model: the rules as JSON text, and the revision.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			p, err := o.client().Policy(ctx)
			if err != nil {
				return err
			}
			rules, err := p.Rules()
			if err != nil {
				return err
			}
			return o.render(ciliumapi.Policy(p), func(w *tabwriter.Writer) {
				row(w, "Revision:", p.Revision)
				row(w, "ORIGIN", "SUBJECT", "DIRECTION", "VERDICT", "ISOLATES", "PEERS", "PORTS")
				for _, r := range rules {
					ports := strings.Join(r.Ports, ",")
					if ports == "" {
						ports = "any"
					}
					row(w, r.Origin, r.Subject, r.Direction, r.Verdict, yesNo(r.DefaultDeny),
						orDash(strings.Join(r.Peers, ",")), ports)
				}
			})
		},
	}, &cobra.Command{
		Use:   "selectors",
		Short: "List the selector cache: each selector, its users and the identities it selects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := apiContext(cmd)
			defer cancel()
			sels, err := o.client().PolicySelectors(ctx)
			if err != nil {
				return err
			}
			if sels == nil {
				sels = []models.PolicySelector{}
			}
			return o.render(sels, func(w *tabwriter.Writer) {
				row(w, "SELECTOR", "USERS", "IDENTITIES")
				for _, s := range sels {
					ids := make([]string, 0, len(s.Identities))
					for _, id := range s.Identities {
						ids = append(ids, id.String())
					}
					row(w, s.Selector, s.Users, orDash(strings.Join(ids, ",")))
				}
			})
		},
	}, newPolicyTraceCommand(o))
	return cmd
}

func newPolicyTraceCommand(o *options) *cobra.Command {
	var src, dst, dport string
	cmd := &cobra.Command{
		Use:   "trace --src <peer> --dst <peer> --dport <port>[/<protocol>]",
		Short: "Judge a new connection: the source's egress and the destination's ingress, and the rules that decide",
		Long: `Judge a new connection from --src to --dst with the agent's policy engine.

A peer is an identity number, a pod as namespace/name, or labels as one
string ("k8s:app=web k8s:io.kubernetes.pod.namespace=prod"). The protocol
of --dport is tcp (the default), udp, sctp or icmp, whose port is the ICMP
type. The command succeeds whatever the verdict.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			protocol, port, err := parseDport(dport)
			if err != nil {
				return err
			}
			ctx, cancel := apiContext(cmd)
			defer cancel()
			tr, err := o.client().PolicyTrace(ctx, src, dst, protocol, port)
			if e := (*models.Error)(nil); errors.As(err, &e) {
				return fmt.Errorf("policy trace --src %q --dst %q: %w", src, dst, e)
			}
			if err != nil {
				return err
			}
			return o.render(tr, func(w *tabwriter.Writer) { traceTable(w, tr) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&src, "src", "", "the source: an identity, a pod namespace/name, or labels")
	fs.StringVar(&dst, "dst", "", "the destination: an identity, a pod namespace/name, or labels")
	fs.StringVar(&dport, "dport", "", "the destination port and protocol, e.g. 80, 53/udp, 8/icmp")
	for _, f := range []string{"src", "dst", "dport"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// parseDport reads --dport: port[/protocol], tcp by default.
func parseDport(s string) (string, uint16, error) {
	num, protocol, found := strings.Cut(s, "/")
	protocol = strings.ToLower(protocol)
	if !found {
		protocol = "tcp"
	}
	proto, ok := models.TraceProtocols[protocol]
	if !ok {
		return "", 0, fmt.Errorf("--dport %q: protocol %q is not tcp, udp, sctp or icmp", s, protocol)
	}
	port, err := models.ParseTracePort(proto, num)
	if err != nil {
		return "", 0, fmt.Errorf("--dport %q: port: %w", s, err)
	}
	return protocol, port, nil
}

func traceTable(w *tabwriter.Writer, tr models.PolicyTrace) {
	row(w, "Source:", tracePeer(tr.Source))
	row(w, "Destination:", tracePeer(tr.Destination))
	row(w, "Destination port:", fmt.Sprintf("%d/%s", tr.Port, tr.Protocol))
	row(w, "Source egress:", traceVerdict(tr.Egress))
	row(w, "Destination ingress:", traceVerdict(tr.Ingress))
	fmt.Fprintln(w)
	final := "DENIED"
	if tr.Allowed {
		final = "ALLOWED"
	}
	fmt.Fprintln(w, "Final verdict: "+final)
}

func tracePeer(p models.TracePeer) string {
	num := "identity " + p.Identity.String()
	if p.Identity == identity.Unknown {
		num = "no identity yet"
	}
	return num + " (" + orDash(strings.Join(p.Labels, " ")) + ")"
}

func traceVerdict(v models.PolicyVerdict) string {
	verdict, enforced := "denied", "not enforced"
	if v.Allowed {
		verdict = "allowed"
	}
	if v.Enforced {
		enforced = "enforced"
	}
	why := "denied by default: no rule allows it"
	if len(v.DecidedBy) > 0 {
		why = verdict + " by " + joinOrigins(v.DecidedBy)
	}
	return verdict + " (" + enforced + "): " + why
}

func joinOrigins(os []models.PolicyOrigin) string {
	s := make([]string, 0, len(os))
	for _, o := range os {
		s = append(s, o.String())
	}
	return orDash(strings.Join(s, ","))
}

// endpointPolicyTable shows an endpoint's policy below its fields.
func endpointPolicyTable(w *tabwriter.Writer, p *models.EndpointPolicy) {
	if p == nil {
		row(w, "Policy:", "not known to the policy engine")
		return
	}
	realized := "-"
	if p.Realized != 0 {
		realized = strconv.FormatUint(p.Realized, 10)
	}
	row(w, "Policy revision:", p.Revision)
	row(w, "Policy realized:", realized)
	row(w, "Policy enforced:", enforcement(p.EnforceIngress, p.EnforceEgress))
	if !p.Ready {
		row(w, "Policy ready:", "no (the identity's labels are not known yet)")
	}
	if p.Error != "" {
		row(w, "Policy error:", p.Error)
	}
	if p.Refused != "" {
		row(w, "Policy refused:", p.Refused)
	}
	fmt.Fprintln(w)
	row(w, "DIRECTION", "IDENTITY", "PROTOCOL", "PORT", "VERDICT", "ORIGINS")
	for _, e := range p.Entries {
		row(w, e.Direction, identityOrAny(e.Identity), spec.ProtoString(e.Protocol), portRange(e.Port, e.EndPort),
			e.Verdict, joinOrigins(e.Origins))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
