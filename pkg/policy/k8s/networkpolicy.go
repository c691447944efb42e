package k8s

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/labels"
	"github.com/cilium-go/cilium/pkg/policy"
	"github.com/cilium-go/cilium/pkg/policy/api"
)

// Selector key prefixes of the identity labels a NetworkPolicy's selectors
// stand for: pods' labels come from Kubernetes, and so do their
// namespace's labels, which every pod carries under a prefix.
const (
	k8sKeyPrefix       = labels.SourceK8s + ":"
	namespaceKeyPrefix = k8sKeyPrefix + labels.PrefixNamespaceLabels
	podNamespaceKey    = k8sKeyPrefix + labels.KeyPodNamespace
)

// The API server accepts label values in selectors that it no longer
// would for objects created before it tightened validation; they select
// nothing, but they must not make an accepted policy fail here.
var npSelectorOpts = metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: true}

// npRule is an ingress or an egress rule of a NetworkPolicy: the two have
// the same shape under different field names.
type npRule struct {
	peers []networkingv1.NetworkPolicyPeer
	ports []networkingv1.NetworkPolicyPort
}

// FromNetworkPolicy translates a Kubernetes NetworkPolicy into rules, with
// Kubernetes' semantics: the pods the policy selects are isolated in each
// direction its policy types name, and each rule allows its peers and
// ports. A policy that is not valid yields no rules and one error naming
// every bad field under "spec".
func FromNetworkPolicy(np *networkingv1.NetworkPolicy) ([]policy.Rule, error) {
	root := field.NewPath("spec")
	errs := metav1validation.ValidateLabelSelector(&np.Spec.PodSelector, npSelectorOpts, root.Child("podSelector"))
	isolateIn, isolateEg, typeErrs := npIsolation(&np.Spec, root.Child("policyTypes"))
	errs = append(errs, typeErrs...)

	subject := api.EndpointSelector{}
	addK8sSelector(&subject, &np.Spec.PodSelector, k8sKeyPrefix)
	base := policy.Rule{
		Origin:  policy.Origin{Kind: policy.KindNetworkPolicy, Namespace: np.Namespace, Name: np.Name},
		Subject: policy.LabelSelector{Selector: subject, Namespace: np.Namespace},
	}
	ingress := make([]npRule, len(np.Spec.Ingress))
	for i, r := range np.Spec.Ingress {
		ingress[i] = npRule{peers: r.From, ports: r.Ports}
	}
	egress := make([]npRule, len(np.Spec.Egress))
	for i, r := range np.Spec.Egress {
		egress[i] = npRule{peers: r.To, ports: r.Ports}
	}

	var rules []policy.Rule
	for _, d := range []struct {
		dir      spec.Direction
		name     string
		peers    string
		rules    []npRule
		isolated bool
	}{
		{spec.Ingress, "ingress", "from", ingress, isolateIn},
		{spec.Egress, "egress", "to", egress, isolateEg},
	} {
		base.Direction = d.dir
		rs, dirErrs := npDirection(base, np.Namespace, d.rules, root.Child(d.name), d.peers)
		errs = append(errs, dirErrs...)
		// Rules of a direction the policy does not isolate change
		// nothing: everything is allowed there anyway. They are still
		// checked, as the API server checks them.
		if d.isolated {
			rules = append(rules, rs...)
		}
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return rules, nil
}

// npIsolation reads policyTypes: which directions the policy isolates.
// Without policyTypes, Kubernetes isolates ingress always and egress when
// there are egress rules.
func npIsolation(s *networkingv1.NetworkPolicySpec, path *field.Path) (ingress, egress bool, errs field.ErrorList) {
	if len(s.PolicyTypes) == 0 {
		return true, len(s.Egress) > 0, nil
	}
	for i, t := range s.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		default:
			errs = append(errs, field.NotSupported(path.Index(i), t,
				[]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}))
		}
	}
	return ingress, egress, errs
}

// npDirection turns the rules of one direction into Rules that isolate.
// An isolated direction without rules still needs a Rule: it is what
// isolates, and it allows nothing.
func npDirection(base policy.Rule, ns string, rules []npRule, path *field.Path, peerField string) ([]policy.Rule, field.ErrorList) {
	base.DefaultDeny = true
	if len(rules) == 0 {
		return []policy.Rule{base}, nil
	}
	var errs field.ErrorList
	out := make([]policy.Rule, 0, len(rules))
	for i, r := range rules {
		p := path.Index(i)
		rule := base
		if len(r.peers) == 0 {
			// No peers: every source or destination, in the cluster or not.
			rule.Peers = []policy.Selector{policy.Wildcard{}}
		}
		for j := range r.peers {
			sel, peerErrs := npPeer(ns, &r.peers[j], p.Child(peerField).Index(j))
			errs = append(errs, peerErrs...)
			if sel != nil {
				rule.Peers = append(rule.Peers, sel)
			}
		}
		for j := range r.ports {
			port, portErrs := npPort(&r.ports[j], p.Child("ports").Index(j))
			errs = append(errs, portErrs...)
			rule.Ports = append(rule.Ports, port)
		}
		out = append(out, rule)
	}
	return out, errs
}

// npPeer translates one peer. A pod selector alone means pods of the
// policy's namespace; a namespace selector means pods of the namespaces
// it selects, all of them unless a pod selector narrows them down.
func npPeer(ns string, peer *networkingv1.NetworkPolicyPeer, path *field.Path) (policy.Selector, field.ErrorList) {
	var errs field.ErrorList
	switch {
	case peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil):
		return nil, field.ErrorList{field.Forbidden(path, "may not specify both ipBlock and another peer")}
	case peer.IPBlock != nil:
		return npIPBlock(peer.IPBlock, path.Child("ipBlock"))
	case peer.PodSelector == nil && peer.NamespaceSelector == nil:
		return nil, field.ErrorList{field.Required(path, "must specify a peer")}
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, npSelectorOpts, path.Child("podSelector"))...)
	errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, npSelectorOpts, path.Child("namespaceSelector"))...)
	sel := api.EndpointSelector{}
	addK8sSelector(&sel, peer.PodSelector, k8sKeyPrefix)
	if peer.NamespaceSelector == nil {
		return policy.LabelSelector{Selector: sel, Namespace: ns}, errs
	}
	addK8sSelector(&sel, peer.NamespaceSelector, namespaceKeyPrefix)
	// Only pods carry a namespace: the requirement keeps a namespace
	// selector that requires little (e.g. {}, or only DoesNotExist) from
	// selecting endpoints that are not pods.
	sel.MatchExpressions = append(sel.MatchExpressions,
		metav1.LabelSelectorRequirement{Key: podNamespaceKey, Operator: metav1.LabelSelectorOpExists})
	return policy.LabelSelector{Selector: sel}, errs
}

// npIPBlock translates an ipBlock. Its prefixes match pods' and nodes'
// addresses too (InCluster), unlike Cilium's CIDR rules.
func npIPBlock(b *networkingv1.IPBlock, path *field.Path) (policy.Selector, field.ErrorList) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path.Child("cidr"), b.CIDR, "must be a valid CIDR, e.g. 10.0.0.0/8")}
	}
	cidr = cidr.Masked()
	sel := policy.CIDRSelector{Prefix: cidr, InCluster: true}
	var errs field.ErrorList
	for i, s := range b.Except {
		p := path.Child("except").Index(i)
		ex, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, s, "must be a valid CIDR, e.g. 10.1.0.0/16"))
		case !contains(cidr, ex.Masked()) || ex.Bits() == cidr.Bits():
			errs = append(errs, field.Invalid(p, s, "must be a strict subset of `cidr`"))
		default:
			sel.Except = append(sel.Except, ex.Masked())
		}
	}
	return sel, errs
}

// npPort translates one port. Without a protocol it is TCP; without a
// port, every port of the protocol.
func npPort(np *networkingv1.NetworkPolicyPort, path *field.Path) (policy.Port, field.ErrorList) {
	var errs field.ErrorList
	var port policy.Port
	proto := corev1.ProtocolTCP
	if np.Protocol != nil {
		proto = *np.Protocol
	}
	var ok bool
	if port.Protocol, ok = k8sProtocol(proto); !ok || proto == "" {
		errs = append(errs, field.NotSupported(path.Child("protocol"), proto,
			[]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}))
	}
	switch {
	case np.Port == nil:
		if np.EndPort != nil {
			errs = append(errs, field.Invalid(path.Child("endPort"), *np.EndPort, "may not be specified when `port` is not specified"))
		}
	case np.Port.Type == intstr.Int:
		errs = append(errs, npPortNumber(path.Child("port"), np.Port.IntVal)...)
		port.Port = uint16(np.Port.IntVal)
		if np.EndPort != nil {
			errs = append(errs, npPortNumber(path.Child("endPort"), *np.EndPort)...)
			if *np.EndPort < np.Port.IntVal {
				errs = append(errs, field.Invalid(path.Child("endPort"), *np.EndPort, "must be greater than or equal to `port`"))
			}
			port.EndPort = uint16(*np.EndPort)
		}
	default:
		if np.EndPort != nil {
			errs = append(errs, field.Invalid(path.Child("endPort"), *np.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(np.Port.StrVal) {
			errs = append(errs, field.Invalid(path.Child("port"), np.Port.StrVal, msg))
		}
		port.Name = np.Port.StrVal
	}
	return port, errs
}

func npPortNumber(path *field.Path, n int32) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(n)) {
		errs = append(errs, field.Invalid(path, n, msg))
	}
	return errs
}

// addK8sSelector adds the requirements of a Kubernetes label selector to
// dst, with prefix on every key: the selector's keys are Kubernetes label
// keys, identities' labels carry their source (and for namespace labels, a
// prefix). A nil selector adds nothing.
func addK8sSelector(dst *api.EndpointSelector, ls *metav1.LabelSelector, prefix string) {
	if ls == nil {
		return
	}
	for k, v := range ls.MatchLabels {
		if dst.MatchLabels == nil {
			dst.MatchLabels = map[string]string{}
		}
		dst.MatchLabels[prefix+k] = v
	}
	for _, e := range ls.MatchExpressions {
		dst.MatchExpressions = append(dst.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      prefix + e.Key,
			Operator: e.Operator,
			Values:   slices.Clone(e.Values),
		})
	}
}
