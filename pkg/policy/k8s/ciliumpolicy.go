package k8s

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// Cluster is what translating a Cilium policy reads of the cluster
// besides the policy: the Services that toServices may name and the
// CiliumCIDRGroups that CIDR rules may name. A nil field reads as none.
type Cluster struct {
	Services   Services
	CIDRGroups CIDRGroups
	// L7Proxy: the node runs the layer-7 proxy. Without it, layer-7
	// rules and toFQDNs are refused: their allows could only allow all
	// or nothing.
	L7Proxy bool
}

// Dependencies are what a translation read of the Cluster: which
// changes of it may change the rules.
type Dependencies struct {
	services serviceRefs
	groups   groupRefs
}

// Empty: the rules read nothing of the Cluster.
func (d Dependencies) Empty() bool { return d.services.empty() && d.groups.empty() }

// ConcernsService reports whether a change of the Service namespace/name
// (or of its EndpointSlices) may change the rules.
func (d Dependencies) ConcernsService(namespace, name string) bool {
	return d.services.concerns(namespace, name)
}

// ConcernsCIDRGroup reports whether a change of the CIDR group name (its
// creation, update or deletion) may change the rules.
func (d Dependencies) ConcernsCIDRGroup(name string) bool { return d.groups.concerns(name) }

// FromCNP translates a CiliumNetworkPolicy: its rules apply to endpoints
// of its namespace, and its endpoint peers and Services are of its
// namespace unless they say otherwise.
func FromCNP(p *v2.CiliumNetworkPolicy, c Cluster) ([]policy.Rule, error) {
	rules, _, err := TranslateCNP(p, c)
	return rules, err
}

// TranslateCNP is FromCNP, also saying what of c the rules depend on.
func TranslateCNP(p *v2.CiliumNetworkPolicy, c Cluster) ([]policy.Rule, Dependencies, error) {
	rules, err := p.Rules()
	if err != nil {
		return nil, Dependencies{}, err
	}
	origin := policy.Origin{Kind: policy.KindCNP, Namespace: p.Namespace, Name: p.Name}
	return translateCilium(origin, p.Namespace, rules, rulePaths(p.Spec, p.Specs), c)
}

// FromCCNP translates a CiliumClusterwideNetworkPolicy: its rules apply
// to endpoints of every namespace, and a Service named without a
// namespace is looked for in every namespace.
func FromCCNP(p *v2.CiliumClusterwideNetworkPolicy, c Cluster) ([]policy.Rule, error) {
	rules, _, err := TranslateCCNP(p, c)
	return rules, err
}

// TranslateCCNP is FromCCNP, also saying what of c the rules depend on.
func TranslateCCNP(p *v2.CiliumClusterwideNetworkPolicy, c Cluster) ([]policy.Rule, Dependencies, error) {
	rules, err := p.Rules()
	if err != nil {
		return nil, Dependencies{}, err
	}
	origin := policy.Origin{Kind: policy.KindCCNP, Name: p.Name}
	return translateCilium(origin, "", rules, rulePaths(p.Spec, p.Specs), c)
}

// rulePaths names the rules that Rules() returns: Spec first, then Specs.
func rulePaths(specRule *api.Rule, specs api.Rules) []*field.Path {
	var paths []*field.Path
	if specRule != nil {
		paths = append(paths, field.NewPath("spec"))
	}
	for i := range specs {
		paths = append(paths, field.NewPath("specs").Index(i))
	}
	return paths
}

// FromCiliumRules translates the rules of a Cilium policy, with Cilium's
// semantics, into rules with origin. namespace is the policy's namespace,
// "" for a clusterwide policy. paths[i] names rules[i] in errors; without
// one it is "specs[i]". IPv6 peers and ICMPv6 types select nothing in
// this IPv4-only cluster. A toPorts entry with layer-7 rules (rules.http,
// rules.dns) becomes a rule of its own that carries them; toFQDNs
// selectors are peers like any other. What this agent does not implement
// (Kafka and the other parsers Cilium removed, TLS, server names, Envoy
// listeners, header values from Secrets, host policies, node selectors)
// is refused rather than half enforced: a policy with any of it, or that
// is not valid, yields no rules and one error naming every such field.
// toServices and CIDR groups are resolved against c as it is now; a
// Service or a group that does not exist is no error, it selects nothing.
func FromCiliumRules(origin policy.Origin, namespace string, rules api.Rules, paths []*field.Path, c Cluster) ([]policy.Rule, error) {
	out, _, err := translateCilium(origin, namespace, rules, paths, c)
	return out, err
}

// translateCilium is FromCiliumRules, also saying which Services and
// CIDR groups the rules depend on.
func translateCilium(origin policy.Origin, namespace string, rules api.Rules, paths []*field.Path, c Cluster) ([]policy.Rule, Dependencies, error) {
	t := &ciliumTranslation{origin: origin, namespace: namespace, cluster: c}
	for i, r := range rules {
		path := field.NewPath("specs").Index(i)
		if i < len(paths) && paths[i] != nil {
			path = paths[i]
		}
		if r == nil {
			t.fail(field.Required(path, ""))
			continue
		}
		t.errs = append(t.errs, r.Validate(path)...)
		t.rule(r, path)
	}
	if len(t.errs) > 0 {
		return nil, Dependencies{}, t.errs.ToAggregate()
	}
	return t.rules, t.refs, nil
}

// initKey selects endpoints that are still initializing.
const initKey = labels.SourceReserved + ":init"

// ciliumTranslation collects the rules and errors of one policy.
type ciliumTranslation struct {
	origin    policy.Origin
	namespace string
	// initSubject: the api rule being translated applies to endpoints
	// that are still initializing. Those have no labels yet, so Cilium
	// does not confine a clusterwide rule's peers to pods for them.
	initSubject bool
	// cluster is looked up for toServices and CIDR groups; refs record
	// what was named.
	cluster Cluster
	refs    Dependencies
	rules   []policy.Rule
	errs    field.ErrorList
}

// fail records an error unless one for the same field is there: Validate
// already refuses some of what the translation refuses too.
func (t *ciliumTranslation) fail(err *field.Error) {
	if !slices.ContainsFunc(t.errs, func(e *field.Error) bool { return e.Field == err.Field }) {
		t.errs = append(t.errs, err)
	}
}

// rule translates one api rule: one Rule per ingress, ingressDeny,
// egress and egressDeny rule, and one more per toPorts entry with
// layer-7 rules.
func (t *ciliumTranslation) rule(r *api.Rule, path *field.Path) {
	if r.NodeSelector != nil {
		t.fail(field.Forbidden(path.Child("nodeSelector"), "host policies are not supported yet"))
	}
	if r.EndpointSelector == nil {
		return // Validate said so
	}
	t.initSubject = hasKey(r.EndpointSelector, initKey)
	isolateIn, isolateEg := defaultDeny(r)
	base := policy.Rule{Origin: t.origin, Subject: t.subject(r.EndpointSelector)}
	for i := range r.Ingress {
		ir := &r.Ingress[i]
		p := path.Child("ingress").Index(i)
		t.allow(base, spec.Ingress, isolateIn, t.ingressPeers(&ir.IngressCommonRule, p), portRuleEntries(ir.ToPorts), ir.ICMPs, p)
	}
	for i := range r.IngressDeny {
		ir := &r.IngressDeny[i]
		p := path.Child("ingressDeny").Index(i)
		ports, l4 := t.ports(portDenyRuleEntries(ir.ToPorts), ir.ICMPs, p)
		t.add(base, spec.Ingress, true, isolateIn, t.ingressPeers(&ir.IngressCommonRule, p), ports, l4)
	}
	for i := range r.Egress {
		er := &r.Egress[i]
		p := path.Child("egress").Index(i)
		if len(er.ToFQDNs) > 0 && !t.cluster.L7Proxy {
			t.fail(field.Forbidden(p.Child("toFQDNs"), noProxy))
		}
		peers := fqdnPeers(t.egressPeers(&er.EgressCommonRule, p), er.ToFQDNs)
		t.allow(base, spec.Egress, isolateEg, peers, portRuleEntries(er.ToPorts), er.ICMPs, p)
	}
	for i := range r.EgressDeny {
		er := &r.EgressDeny[i]
		p := path.Child("egressDeny").Index(i)
		ports, l4 := t.ports(portDenyRuleEntries(er.ToPorts), er.ICMPs, p)
		t.add(base, spec.Egress, true, isolateEg, t.egressPeers(&er.EgressCommonRule, p), ports, l4)
	}
}

// allow appends the Rules of one allow rule: one of its toPorts entries
// without layer-7 rules and its icmps (or of every port, when it names
// none), and one of each entry with layer-7 rules, which the proxy of
// that entry judges: the same peers on that entry's ports only.
func (t *ciliumTranslation) allow(base policy.Rule, dir spec.Direction, defaultDeny bool, peers l3, entries []portEntry, icmps []api.ICMPRule, path *field.Path) {
	var plain, proxied []portEntry
	for _, e := range entries {
		if e.l7 == nil {
			plain = append(plain, e)
		} else {
			proxied = append(proxied, e)
		}
	}
	if len(proxied) == 0 || len(plain) > 0 || len(icmps) > 0 {
		ports, l4 := t.ports(plain, icmps, path)
		t.add(base, dir, false, defaultDeny, peers, ports, l4)
	}
	for _, e := range proxied {
		rules := path.Child("toPorts").Index(e.index).Child("rules")
		if !t.cluster.L7Proxy {
			t.fail(field.Forbidden(rules, noProxy))
		}
		r := base
		r.L7 = e.l7
		ports, l4 := t.ports([]portEntry{e}, nil, path)
		t.add(r, dir, false, defaultDeny, peers, ports, l4)
	}
}

// noProxy says why a node without the layer-7 proxy refuses its rules.
const noProxy = "needs the layer-7 proxy, which this agent does not run (--enable-l7-proxy)"

// l3 is what a rule says of its peers: the selectors, and whether it
// names peers at all (it may name some that select nothing here).
type l3 struct {
	peers []policy.Selector
	given bool
}

// add appends a Rule of one api rule. Cilium reads a rule that names
// ports but no peers as allowing those ports from (to) every peer, and
// one that names neither as allowing nothing.
func (t *ciliumTranslation) add(base policy.Rule, dir spec.Direction, deny, defaultDeny bool, peers l3, ports []policy.Port, l4 bool) {
	r := base
	r.Direction, r.Deny, r.DefaultDeny = dir, deny, defaultDeny
	r.Peers = slices.Clone(peers.peers) // the rules of one api rule share its peers
	if !peers.given && l4 {
		r.Peers = []policy.Selector{policy.Wildcard{}}
	}
	if l4 && len(ports) == 0 {
		// Ports were named, none of them IPv4 traffic's: no ports
		// would mean every port.
		r.Peers = nil
	}
	r.Ports = ports
	t.rules = append(t.rules, r)
}

// defaultDeny says whether the rule isolates its endpoints in each
// direction: when it has rules there, unless enableDefaultDeny says no.
func defaultDeny(r *api.Rule) (ingress, egress bool) {
	ingress = len(r.Ingress) > 0 || len(r.IngressDeny) > 0
	egress = len(r.Egress) > 0 || len(r.EgressDeny) > 0
	if c := r.EnableDefaultDeny; c != nil {
		ingress = ingress && (c.Ingress == nil || *c.Ingress)
		egress = egress && (c.Egress == nil || *c.Egress)
	}
	return ingress, egress
}

// subject selects the endpoints a rule applies to. A namespaced policy
// applies in its namespace only; Cilium replaces a namespace the selector
// names, so this does too.
func (t *ciliumTranslation) subject(es *api.EndpointSelector) policy.LabelSelector {
	sel := copySelector(es)
	if t.namespace != "" {
		delete(sel.MatchLabels, podNamespaceKey)
	}
	return policy.LabelSelector{Selector: sel, Namespace: t.namespace}
}

// peerFields are the peer fields of an ingress or egress rule, which
// differ only in their names ("from..." or "to..."); only egress rules
// name Services.
type peerFields struct {
	prefix    string
	endpoints []api.EndpointSelector
	nodes     []api.EndpointSelector
	cidrs     []api.CIDR
	cidrSets  []api.CIDRRule
	entities  []api.Entity
	services  []api.Service
}

func (t *ciliumTranslation) ingressPeers(c *api.IngressCommonRule, path *field.Path) l3 {
	return t.peers(peerFields{"from", c.FromEndpoints, c.FromNodes, c.FromCIDR, c.FromCIDRSet, c.FromEntities, nil}, path)
}

func (t *ciliumTranslation) egressPeers(c *api.EgressCommonRule, path *field.Path) l3 {
	return t.peers(peerFields{"to", c.ToEndpoints, c.ToNodes, c.ToCIDR, c.ToCIDRSet, c.ToEntities, c.ToServices}, path)
}

// peers translates a rule's peer fields. A field given empty (e.g.
// "fromEndpoints: []") names peers, none: as in Cilium, it selects
// nothing rather than everything. So do Services that select nothing
// (yet).
func (t *ciliumTranslation) peers(f peerFields, path *field.Path) l3 {
	out := l3{given: f.endpoints != nil || f.nodes != nil || f.cidrs != nil || f.cidrSets != nil || f.entities != nil ||
		f.services != nil}
	if f.nodes != nil {
		t.fail(field.Forbidden(path.Child(f.prefix+"Nodes"), "selecting nodes is not supported yet"))
	}
	for i := range f.endpoints {
		out.peers = append(out.peers, t.endpointPeer(&f.endpoints[i]))
	}
	for i, c := range f.cidrs {
		if p, ok := t.prefix(c, path.Child(f.prefix+"CIDR").Index(i)); ok {
			out.peers = append(out.peers, policy.CIDRSelector{Prefix: p})
		}
	}
	for i := range f.cidrSets {
		r, p := &f.cidrSets[i], path.Child(f.prefix+"CIDRSet").Index(i)
		if r.Cidr == "" {
			out.peers = append(out.peers, t.cidrGroupPeers(r, p)...)
		} else if sel, ok := t.cidrSet(r, p); ok {
			out.peers = append(out.peers, sel)
		}
	}
	for _, e := range f.entities {
		if sel := policy.EntitySelector(e); sel != nil {
			out.peers = append(out.peers, sel)
		}
	}
	out.peers = append(out.peers, t.servicePeers(f.services)...)
	// Entities overlap ("world" and "world-ipv4"), and so may Services
	// and other peers: one filter each is enough.
	seen := map[string]bool{}
	out.peers = slices.DeleteFunc(out.peers, func(s policy.Selector) bool {
		dup := seen[s.Key()]
		seen[s.Key()] = true
		return dup
	})
	return out
}

// fqdnPeers adds the selectors of toFQDNs to an egress rule's peers
// (Validate leaves no others). Unlike the other peer fields, toFQDNs given
// empty names no peers, as in Cilium: with toPorts, the rule allows its
// ports to every peer.
func fqdnPeers(peers l3, sels []api.FQDNSelector) l3 {
	for _, s := range sels {
		peers.peers = append(peers.peers, policy.NewFQDNSelector(policy.DNSRule{MatchName: s.MatchName, MatchPattern: s.MatchPattern}))
	}
	peers.given = peers.given || len(sels) > 0
	return peers
}

// endpointPeer scopes an endpoint peer as Cilium does: to pods (and in a
// namespaced policy, to its namespace) unless the selector names reserved
// identities, the pod namespace, or (namespaced) namespace labels.
func (t *ciliumTranslation) endpointPeer(es *api.EndpointSelector) policy.Selector {
	sel := copySelector(es)
	switch {
	case hasKeyFunc(&sel, func(k string) bool { return strings.HasPrefix(k, labels.SourceReserved+":") }):
	case hasKeyFunc(&sel, func(k string) bool { return isK8sKey(k, labels.KeyPodNamespace) }):
	case t.namespace != "":
		if hasKeyFunc(&sel, func(k string) bool { return isK8sKeyPrefix(k, labels.PrefixNamespaceLabels) }) {
			break
		}
		return policy.LabelSelector{Selector: sel, Namespace: t.namespace}
	case !t.initSubject:
		sel.MatchExpressions = append(sel.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: podNamespaceKey, Operator: metav1.LabelSelectorOpExists})
	}
	return policy.LabelSelector{Selector: sel}
}

// isK8sKey reports whether selector key k selects the Kubernetes label
// key: with the k8s or any source, or with none (which means any).
func isK8sKey(k, key string) bool {
	return k == key || k == k8sKeyPrefix+key || k == labels.SourceAny+":"+key
}

func isK8sKeyPrefix(k, prefix string) bool {
	for _, src := range []string{"", k8sKeyPrefix, labels.SourceAny + ":"} {
		if strings.HasPrefix(k, src+prefix) {
			return true
		}
	}
	return false
}

func hasKey(es *api.EndpointSelector, key string) bool {
	return hasKeyFunc(es, func(k string) bool { return k == key })
}

func hasKeyFunc(es *api.EndpointSelector, f func(string) bool) bool {
	for k := range es.MatchLabels {
		if f(k) {
			return true
		}
	}
	return slices.ContainsFunc(es.MatchExpressions, func(e metav1.LabelSelectorRequirement) bool { return f(e.Key) })
}

func copySelector(es *api.EndpointSelector) api.EndpointSelector {
	out := api.EndpointSelector{MatchLabels: maps.Clone(es.MatchLabels)}
	for _, e := range es.MatchExpressions {
		e.Values = slices.Clone(e.Values)
		out.MatchExpressions = append(out.MatchExpressions, e)
	}
	return out
}

// prefix reads a prefix. The cluster is IPv4-only, so an IPv6 prefix
// selects nothing: as in Cilium, whose IPv6 CIDR identities are never
// allocated when IPv6 is off, the policy applies and its IPv6 peers are
// left out (ok false, no error). They must not be replaced by anything,
// since a rule's empty peer list allows nothing.
func (t *ciliumTranslation) prefix(c api.CIDR, path *field.Path) (p netip.Prefix, ok bool) {
	p, err := api.ParseCIDR(c)
	if err != nil {
		t.fail(field.Invalid(path, string(c), err.Error()))
		return netip.Prefix{}, false
	}
	return p, p.Addr().Is4()
}

// cidrSet translates a CIDR set that names a prefix; one of IPv6 selects
// nothing, but its excepts are checked all the same.
func (t *ciliumTranslation) cidrSet(r *api.CIDRRule, path *field.Path) (policy.Selector, bool) {
	p, err := api.ParseCIDR(r.Cidr)
	if err != nil {
		t.fail(field.Invalid(path.Child("cidr"), string(r.Cidr), err.Error()))
		return nil, false
	}
	sel := policy.CIDRSelector{Prefix: p}
	for i, ex := range r.ExceptCIDRs {
		e, err := api.ParseCIDR(ex)
		if err != nil || !contains(p, e) {
			t.fail(field.Invalid(path.Child("except").Index(i), string(ex), "must be a prefix inside cidr"))
			continue
		}
		sel.Except = append(sel.Except, e)
	}
	return sel, p.Addr().Is4()
}

// portEntry is one toPorts entry: its index, its ports, and its layer-7
// rules (nil: none).
type portEntry struct {
	index int
	ports []api.PortProtocol
	l7    *policy.L7Rules
}

func portRuleEntries(rules []api.PortRule) []portEntry {
	out := make([]portEntry, 0, len(rules))
	for i, r := range rules {
		out = append(out, portEntry{index: i, ports: r.Ports, l7: l7Rules(r.Rules)})
	}
	return out
}

func portDenyRuleEntries(rules []api.PortDenyRule) []portEntry {
	out := make([]portEntry, 0, len(rules))
	for i, r := range rules {
		out = append(out, portEntry{index: i, ports: r.Ports})
	}
	return out
}

// l7Rules translates the layer-7 rules of a toPorts entry (Validate leaves
// one protocol's at most). An entry whose rules are all empty lists has
// none, as in Cilium: it allows its ports whole, without a proxy. An
// empty rule (http: [{}]) allows every request, each of them seen by the
// proxy.
func l7Rules(r *api.L7Rules) *policy.L7Rules {
	switch {
	case r == nil:
		return nil
	case len(r.HTTP) > 0:
		out := &policy.L7Rules{Parser: policy.ParserHTTP}
		for i := range r.HTTP {
			out.HTTP = append(out.HTTP, r.HTTP[i].HTTPRule())
		}
		return out
	case len(r.DNS) > 0:
		out := &policy.L7Rules{Parser: policy.ParserDNS}
		for _, d := range r.DNS {
			out.DNS = append(out.DNS, policy.DNSRule{MatchName: d.MatchName, MatchPattern: d.MatchPattern})
		}
		return out
	}
	return nil
}

// ports translates toPorts entries and icmps, and says whether the rule
// names any of them (l4): Validate refuses both in one rule.
func (t *ciliumTranslation) ports(entries []portEntry, icmps []api.ICMPRule, path *field.Path) (out []policy.Port, l4 bool) {
	for _, e := range entries {
		for j, pp := range e.ports {
			if p, ok := t.port(pp, path.Child("toPorts").Index(e.index).Child("ports").Index(j)); ok {
				out = append(out, p)
			}
		}
	}
	out = append(out, t.icmps(icmps, path.Child("icmps"))...)
	return out, len(entries) > 0 || len(icmps) > 0
}

// port translates one port. ANY (or no protocol) is TCP, UDP and SCTP,
// or with port 0 every protocol.
func (t *ciliumTranslation) port(pp api.PortProtocol, path *field.Path) (policy.Port, bool) {
	var out policy.Port
	switch pp.Protocol {
	case "", api.ProtoAny:
		out.AnyL4 = true
	case api.ProtoTCP:
		out.Protocol = spec.ProtoTCP
	case api.ProtoUDP:
		out.Protocol = spec.ProtoUDP
	case api.ProtoSCTP:
		out.Protocol = spec.ProtoSCTP
	default:
		t.fail(field.NotSupported(path.Child("protocol"), pp.Protocol, api.Protocols))
		return policy.Port{}, false
	}
	n, named, err := api.ParsePort(pp.Port)
	if err != nil {
		t.fail(field.Invalid(path.Child("port"), pp.Port, err.Error()))
		return policy.Port{}, false
	}
	if named {
		out.Name = pp.Port
		return out, true
	}
	out.Port = n
	if pp.EndPort > int32(n) && n != 0 && pp.EndPort <= 65535 {
		out.EndPort = uint16(pp.EndPort)
	}
	return out, true
}

// icmps translates ICMP types into ports of ICMP, whose port is the type.
// IPv6 fields select nothing: no ICMPv6 traffic in an IPv4-only cluster.
// Type 0 (echo reply) comes out as port 0, every type: Cilium has the
// same limit (cilium/cilium#41304), and the datapath's entries cannot
// tell the two apart.
func (t *ciliumTranslation) icmps(rules []api.ICMPRule, path *field.Path) []policy.Port {
	var out []policy.Port
	for i, r := range rules {
		for j := range r.Fields {
			f := &r.Fields[j]
			p := path.Index(i).Child("fields").Index(j)
			switch f.ICMPFamilyOrDefault() {
			case api.ICMPFamilyIPv4:
			case api.ICMPFamilyIPv6:
				if _, err := f.TypeNumber(); err != nil {
					t.fail(field.Invalid(p.Child("type"), f.Type.String(), err.Error()))
				}
				continue
			default:
				t.fail(field.NotSupported(p.Child("family"), f.Family, api.ICMPFamilies))
				continue
			}
			typ, err := f.TypeNumber()
			if err != nil {
				t.fail(field.Invalid(p.Child("type"), f.Type.String(), err.Error()))
				continue
			}
			out = append(out, policy.Port{Protocol: spec.ProtoICMP, Port: uint16(typ)})
		}
	}
	return out
}
