package api

import (
	"errors"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cilium-go/cilium/pkg/fqdn"
	"github.com/cilium-go/cilium/pkg/l7"
)

// l7Scope is where a toPorts entry is: in an ingress or an egress rule,
// of a pod's or a host's policy. Cilium takes the layer-7 rules of some
// protocols in some of them only.
type l7Scope struct{ ingress, host bool }

// refusal says why Cilium refuses rules of proto ("http" or "dns") here,
// or "" when it takes them.
func (s l7Scope) refusal(proto string) string {
	switch {
	case s.host && s.ingress:
		return "layer-7 rules are not supported in a host policy's ingress rules"
	case s.host && proto == "http":
		return "HTTP rules are not supported in a host policy"
	case s.ingress && proto == "dns":
		return "DNS rules apply to egress only"
	}
	return ""
}

func validatePortRules(path *field.Path, rules []PortRule, scope l7Scope) field.ErrorList {
	var errs field.ErrorList
	for i := range rules {
		r, p := &rules[i], path.Index(i)
		errs = append(errs, validatePorts(p.Child("ports"), r.Ports)...)
		errs = append(errs, r.validateProxyFields(p)...)
		if r.Rules != nil {
			errs = append(errs, r.Rules.validate(p, r.Ports, scope)...)
		}
	}
	return errs
}

// validateProxyFields refuses Cilium's TLS and Envoy fields: no proxy of
// this agent terminates or originates TLS, matches server names or hands
// connections to Envoy, and the ports alone would allow more.
func (r *PortRule) validateProxyFields(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.ServerNames) > 0 {
		errs = append(errs, field.Forbidden(path.Child("serverNames"), "matching TLS server names is not supported"))
	}
	if r.TerminatingTLS != nil {
		errs = append(errs, field.Forbidden(path.Child("terminatingTLS"), "terminating TLS is not supported"))
	}
	if r.OriginatingTLS != nil {
		errs = append(errs, field.Forbidden(path.Child("originatingTLS"), "originating TLS is not supported"))
	}
	if r.Listener != nil {
		errs = append(errs, field.Forbidden(path.Child("listener"), "Envoy listeners are not supported"))
	}
	return errs
}

// validate checks the layer-7 rules of the toPorts entry at path, whose
// ports are ports.
func (r *L7Rules) validate(path *field.Path, ports []PortProtocol, scope l7Scope) field.ErrorList {
	var errs field.ErrorList
	rp := path.Child("rules")
	if len(r.Kafka) > 0 {
		errs = append(errs, field.Forbidden(rp.Child("kafka"), "Kafka rules are not supported (Cilium removed them in 1.20)"))
	}
	if r.L7Proto != "" {
		errs = append(errs, field.Forbidden(rp.Child("l7proto"), "Envoy Go extensions are not supported (Cilium removed them in 1.20)"))
	}
	if len(r.L7) > 0 {
		errs = append(errs, field.Forbidden(rp.Child("l7"), "Envoy Go extensions are not supported (Cilium removed them in 1.20)"))
	}
	var proto string
	switch {
	case len(r.HTTP) > 0 && len(r.DNS) > 0:
		return append(errs, field.Forbidden(rp.Child("dns"), "http and dns rules cannot be combined in one toPorts entry"))
	case len(r.HTTP) > 0:
		proto = "http"
	case len(r.DNS) > 0:
		proto = "dns"
	default:
		return errs // no layer-7 rules: the ports are allowed whole
	}
	if why := scope.refusal(proto); why != "" {
		return append(errs, field.Forbidden(rp.Child(proto), why))
	}
	errs = append(errs, validateL7Ports(path.Child("ports"), ports, proto)...)
	for i := range r.HTTP {
		errs = append(errs, r.HTTP[i].validate(rp.Child("http").Index(i))...)
	}
	for i := range r.DNS {
		errs = append(errs, (*FQDNSelector)(&r.DNS[i]).validate(rp.Child("dns").Index(i))...)
	}
	return errs
}

// validateL7Ports checks the ports of an entry with rules of proto as
// Cilium does: each a number other than 0 or a name; for HTTP, TCP (ANY
// too is refused); for DNS, UDP, TCP or ANY, and no range.
func validateL7Ports(path *field.Path, ports []PortProtocol, proto string) field.ErrorList {
	if len(ports) == 0 {
		return field.ErrorList{field.Required(path, "layer-7 rules need a port")}
	}
	var errs field.ErrorList
	for i, pp := range ports {
		p := path.Index(i)
		n, named, err := ParsePort(pp.Port)
		if err != nil || (pp.Protocol != "" && !slices.Contains(Protocols, pp.Protocol)) {
			continue // validatePorts said so
		}
		switch {
		case n == 0 && !named:
			errs = append(errs, field.Invalid(p.Child("port"), pp.Port, "layer-7 rules need a port other than 0"))
		case proto == "http" && pp.Protocol != ProtoTCP:
			errs = append(errs, field.Invalid(p.Child("protocol"), pp.Protocol, "HTTP rules apply to TCP only"))
		case proto == "dns" && pp.Protocol == ProtoSCTP:
			errs = append(errs, field.Invalid(p.Child("protocol"), pp.Protocol, "DNS rules apply to UDP, TCP or ANY"))
		case proto == "dns" && pp.EndPort > int32(n):
			errs = append(errs, field.Invalid(p.Child("endPort"), pp.EndPort, "DNS rules do not take a port range"))
		}
	}
	return errs
}

// validate compiles the rule as the proxy would, naming the first bad
// field, and refuses header values from Secrets.
func (h *PortRuleHTTP) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range h.HeaderMatches {
		if h.HeaderMatches[i].Secret != nil {
			errs = append(errs, field.Forbidden(path.Child("headerMatches").Index(i).Child("secret"), "secrets are not supported"))
		}
	}
	if _, err := l7.CompileHTTP(h.HTTPRule()); err != nil {
		if fe := (*l7.FieldError)(nil); errors.As(err, &fe) {
			errs = append(errs, field.Invalid(path.Child(fe.Field), fe.Value, fe.Err.Error()))
		} else {
			errs = append(errs, field.Invalid(path, "", err.Error()))
		}
	}
	return errs
}

// validateFQDNs checks toFQDNs. As in Cilium, they are the only peers of
// their rule: its toPorts apply to them.
func (e *EgressRule) validateFQDNs(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(e.ToFQDNs) > 0 {
		var others []string
		for _, f := range []struct {
			name string
			n    int
		}{
			{"toEndpoints", len(e.ToEndpoints)}, {"toCIDR", len(e.ToCIDR)}, {"toCIDRSet", len(e.ToCIDRSet)},
			{"toEntities", len(e.ToEntities)}, {"toServices", len(e.ToServices)}, {"toNodes", len(e.ToNodes)},
		} {
			if f.n > 0 {
				others = append(others, f.name)
			}
		}
		if len(others) > 0 {
			errs = append(errs, field.Forbidden(path, "cannot be combined with "+strings.Join(others, ", ")+" in one rule"))
		}
	}
	for i := range e.ToFQDNs {
		errs = append(errs, e.ToFQDNs[i].validate(path.Index(i))...)
	}
	return errs
}

// validate checks that s is one name or one pattern that pkg/fqdn reads.
func (s *FQDNSelector) validate(path *field.Path) field.ErrorList {
	switch {
	case s.MatchName == "" && s.MatchPattern == "":
		return field.ErrorList{field.Required(path.Child("matchName"), "one of matchName or matchPattern is required")}
	case s.MatchName != "" && s.MatchPattern != "":
		return field.ErrorList{field.Invalid(path.Child("matchPattern"), s.MatchPattern, "matchName and matchPattern are mutually exclusive")}
	case s.MatchName != "":
		if _, err := fqdn.ParseName(s.MatchName); err != nil {
			return field.ErrorList{field.Invalid(path.Child("matchName"), s.MatchName, err.Error())}
		}
	default:
		if _, err := fqdn.ParsePattern(s.MatchPattern); err != nil {
			return field.ErrorList{field.Invalid(path.Child("matchPattern"), s.MatchPattern, err.Error())}
		}
	}
	return nil
}
