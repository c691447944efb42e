package api

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks r and returns every problem found, each naming its field
// path under path (e.g. spec.ingress[0].toPorts[1].ports[0].endPort).
func (r *Rule) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	host := r.NodeSelector != nil
	switch {
	case r.EndpointSelector == nil && r.NodeSelector == nil:
		errs = append(errs, field.Required(path.Child("endpointSelector"), "one of endpointSelector or nodeSelector is required"))
	case r.EndpointSelector != nil && r.NodeSelector != nil:
		errs = append(errs, field.Invalid(path.Child("nodeSelector"), "", "endpointSelector and nodeSelector are mutually exclusive"))
	}
	errs = append(errs, r.EndpointSelector.validate(path.Child("endpointSelector"))...)
	errs = append(errs, r.NodeSelector.validate(path.Child("nodeSelector"))...)
	for i := range r.Ingress {
		p := path.Child("ingress").Index(i)
		errs = append(errs, r.Ingress[i].IngressCommonRule.validate(p)...)
		errs = append(errs, validatePortRules(p.Child("toPorts"), r.Ingress[i].ToPorts, l7Scope{ingress: true, host: host})...)
		errs = append(errs, validateICMPs(p.Child("icmps"), r.Ingress[i].ICMPs, len(r.Ingress[i].ToPorts) > 0)...)
	}
	for i := range r.IngressDeny {
		p := path.Child("ingressDeny").Index(i)
		errs = append(errs, r.IngressDeny[i].IngressCommonRule.validate(p)...)
		errs = append(errs, validatePortDenyRules(p.Child("toPorts"), r.IngressDeny[i].ToPorts)...)
		errs = append(errs, validateICMPs(p.Child("icmps"), r.IngressDeny[i].ICMPs, len(r.IngressDeny[i].ToPorts) > 0)...)
	}
	for i := range r.Egress {
		p := path.Child("egress").Index(i)
		errs = append(errs, r.Egress[i].EgressCommonRule.validate(p)...)
		errs = append(errs, validatePortRules(p.Child("toPorts"), r.Egress[i].ToPorts, l7Scope{host: host})...)
		errs = append(errs, validateICMPs(p.Child("icmps"), r.Egress[i].ICMPs, len(r.Egress[i].ToPorts) > 0)...)
		errs = append(errs, r.Egress[i].validateFQDNs(p.Child("toFQDNs"))...)
	}
	for i := range r.EgressDeny {
		p := path.Child("egressDeny").Index(i)
		errs = append(errs, r.EgressDeny[i].EgressCommonRule.validate(p)...)
		errs = append(errs, validatePortDenyRules(p.Child("toPorts"), r.EgressDeny[i].ToPorts)...)
		errs = append(errs, validateICMPs(p.Child("icmps"), r.EgressDeny[i].ICMPs, len(r.EgressDeny[i].ToPorts) > 0)...)
	}
	for i, l := range r.Labels {
		if l.Key == "" {
			errs = append(errs, field.Required(path.Child("labels").Index(i).Child("key"), ""))
		}
	}
	if r.Log != nil && len(r.Log.Value) > 32 {
		errs = append(errs, field.TooLong(path.Child("log", "value"), "", 32))
	}
	return errs
}

func (s *EndpointSelector) validate(path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	for k, v := range s.MatchLabels {
		// Cilium keys may carry a source prefix ("k8s:app"); the rest must be a
		// valid Kubernetes label key.
		key := k
		if src, rest, ok := strings.Cut(k, ":"); ok && !strings.Contains(src, "/") {
			key = rest
		}
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(path.Child("matchLabels").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(path.Child("matchLabels").Key(k), v, msg))
		}
	}
	for i, e := range s.MatchExpressions {
		p := path.Child("matchExpressions").Index(i)
		if e.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			if len(e.Values) == 0 {
				errs = append(errs, field.Required(p.Child("values"), "must be non-empty for In and NotIn"))
			}
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
			if len(e.Values) > 0 {
				errs = append(errs, field.Forbidden(p.Child("values"), "must be empty for Exists and DoesNotExist"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), e.Operator,
				[]metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}))
		}
	}
	return errs
}

func (c *IngressCommonRule) validate(path *field.Path) field.ErrorList {
	errs := validatePeers(path, "from", c.FromEndpoints, c.FromNodes, c.FromCIDR, c.FromCIDRSet, c.FromEntities)
	return errs
}

func (c *EgressCommonRule) validate(path *field.Path) field.ErrorList {
	errs := validatePeers(path, "to", c.ToEndpoints, c.ToNodes, c.ToCIDR, c.ToCIDRSet, c.ToEntities)
	for i := range c.ToServices {
		errs = append(errs, c.ToServices[i].validate(path.Child("toServices").Index(i))...)
	}
	return errs
}

// validate checks that s names Services one way, by a name a Service can
// have or by a valid selector, in a namespace that can exist.
func (s *Service) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case s.K8sService == nil && s.K8sServiceSelector == nil:
		return field.ErrorList{field.Required(path.Child("k8sService"), "one of k8sService or k8sServiceSelector is required")}
	case s.K8sService != nil && s.K8sServiceSelector != nil:
		errs = append(errs, field.Invalid(path.Child("k8sServiceSelector"), "", "k8sService and k8sServiceSelector are mutually exclusive"))
	}
	if ref := s.K8sService; ref != nil {
		p := path.Child("k8sService")
		if ref.ServiceName == "" {
			errs = append(errs, field.Required(p.Child("serviceName"), ""))
		} else {
			for _, msg := range validation.IsDNS1035Label(ref.ServiceName) {
				errs = append(errs, field.Invalid(p.Child("serviceName"), ref.ServiceName, msg))
			}
		}
		errs = append(errs, validateNamespace(p.Child("namespace"), ref.Namespace)...)
	}
	if sel := s.K8sServiceSelector; sel != nil {
		p := path.Child("k8sServiceSelector")
		errs = append(errs, sel.Selector.validate(p.Child("selector"))...)
		errs = append(errs, validateNamespace(p.Child("namespace"), sel.Namespace)...)
	}
	return errs
}

// validateNamespace checks a namespace name; empty is valid (the default).
func validateNamespace(path *field.Path, ns string) field.ErrorList {
	if ns == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(path, ns, msg))
	}
	return errs
}

func validatePeers(path *field.Path, dir string, eps, nodes []EndpointSelector, cidrs []CIDR, sets []CIDRRule, ents []Entity) field.ErrorList {
	var errs field.ErrorList
	for i := range eps {
		errs = append(errs, eps[i].validate(path.Child(dir+"Endpoints").Index(i))...)
	}
	for i := range nodes {
		errs = append(errs, nodes[i].validate(path.Child(dir+"Nodes").Index(i))...)
	}
	for i, c := range cidrs {
		if _, err := ParseCIDR(c); err != nil {
			errs = append(errs, field.Invalid(path.Child(dir+"CIDR").Index(i), string(c), err.Error()))
		}
	}
	for i, s := range sets {
		errs = append(errs, s.validate(path.Child(dir+"CIDRSet").Index(i))...)
	}
	for i, e := range ents {
		if !slices.Contains(Entities, e) {
			errs = append(errs, field.NotSupported(path.Child(dir+"Entities").Index(i), e, Entities))
		}
	}
	return errs
}

// ParseCIDR reads a prefix or a single address (a /32 or /128).
func ParseCIDR(c CIDR) (netip.Prefix, error) {
	s := string(c)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an address or prefix")
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or prefix")
	}
	return p.Masked(), nil
}

func (r *CIDRRule) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if r.Cidr != "" {
		set = append(set, "cidr")
	}
	if r.CIDRGroupRef != "" {
		set = append(set, "cidrGroupRef")
	}
	if r.CIDRGroupSelector != nil {
		set = append(set, "cidrGroupSelector")
	}
	switch len(set) {
	case 0:
		return append(errs, field.Required(path.Child("cidr"), "one of cidr, cidrGroupRef or cidrGroupSelector is required"))
	case 1:
	default:
		return append(errs, field.Invalid(path.Child(set[1]), "", "only one of cidr, cidrGroupRef or cidrGroupSelector may be set, not "+strings.Join(set, " and ")))
	}
	if r.CIDRGroupRef != "" {
		for _, msg := range validation.IsDNS1123Subdomain(r.CIDRGroupRef) {
			errs = append(errs, field.Invalid(path.Child("cidrGroupRef"), r.CIDRGroupRef, msg))
		}
	}
	errs = append(errs, r.CIDRGroupSelector.validate(path.Child("cidrGroupSelector"))...)
	if r.Cidr == "" {
		// The group's prefixes are known only when the rule is resolved:
		// an except applies to those it falls in, as in Cilium.
		for i, ex := range r.ExceptCIDRs {
			if _, err := ParseCIDR(ex); err != nil {
				errs = append(errs, field.Invalid(path.Child("except").Index(i), string(ex), err.Error()))
			}
		}
		return errs
	}
	base, err := ParseCIDR(r.Cidr)
	if err != nil {
		return append(errs, field.Invalid(path.Child("cidr"), string(r.Cidr), err.Error()))
	}
	for i, ex := range r.ExceptCIDRs {
		p, err := ParseCIDR(ex)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("except").Index(i), string(ex), err.Error()))
		case !base.Contains(p.Addr()) || p.Bits() < base.Bits():
			errs = append(errs, field.Invalid(path.Child("except").Index(i), string(ex), "not contained in "+string(r.Cidr)))
		}
	}
	return errs
}

func validatePortDenyRules(path *field.Path, rules []PortDenyRule) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		errs = append(errs, validatePorts(path.Index(i).Child("ports"), r.Ports)...)
	}
	return errs
}

func validatePorts(path *field.Path, ports []PortProtocol) field.ErrorList {
	var errs field.ErrorList
	for i, pp := range ports {
		p := path.Index(i)
		if pp.Protocol != "" && !slices.Contains(Protocols, pp.Protocol) {
			errs = append(errs, field.NotSupported(p.Child("protocol"), pp.Protocol, Protocols))
		}
		port, named, err := ParsePort(pp.Port)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("port"), pp.Port, err.Error()))
			continue
		}
		if pp.EndPort == 0 {
			continue
		}
		switch {
		case named:
			errs = append(errs, field.Invalid(p.Child("endPort"), pp.EndPort, "a range needs a numeric port"))
		case port == 0:
			// Port 0 means every port: a range from it would silently
			// allow far more than the end port says.
			errs = append(errs, field.Invalid(p.Child("endPort"), pp.EndPort, "a range needs a start port above 0"))
		case pp.EndPort < 0 || pp.EndPort > 65535:
			errs = append(errs, field.Invalid(p.Child("endPort"), pp.EndPort, "must be between 0 and 65535"))
		case uint16(pp.EndPort) < port:
			errs = append(errs, field.Invalid(p.Child("endPort"), pp.EndPort, fmt.Sprintf("must not be below port %d", port)))
		}
	}
	return errs
}

// ParsePort reads a port number (0 means any port) or a named port (an IANA
// service name as used in a container's ports). Empty is port 0.
func ParsePort(s string) (port uint16, named bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), false, nil
	}
	if s[0] >= '0' && s[0] <= '9' {
		return 0, false, fmt.Errorf("must be a number between 0 and 65535 or a port name")
	}
	if msgs := validation.IsValidPortName(s); len(msgs) > 0 {
		return 0, false, fmt.Errorf("port name: %s", strings.Join(msgs, "; "))
	}
	return 0, true, nil
}

func validateICMPs(path *field.Path, rules []ICMPRule, hasPorts bool) field.ErrorList {
	var errs field.ErrorList
	if len(rules) > 0 && hasPorts {
		errs = append(errs, field.Forbidden(path, "icmps and toPorts cannot be combined in one rule"))
	}
	for i, r := range rules {
		for j, f := range r.Fields {
			p := path.Index(i).Child("fields").Index(j)
			if f.Family != "" && f.Family != ICMPFamilyIPv4 && f.Family != ICMPFamilyIPv6 {
				errs = append(errs, field.NotSupported(p.Child("family"), f.Family, ICMPFamilies))
				continue
			}
			if _, err := f.TypeNumber(); err != nil {
				errs = append(errs, field.Invalid(p.Child("type"), f.Type.String(), err.Error()))
			}
		}
	}
	return errs
}
