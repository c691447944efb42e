// Package k8s reads Kubernetes objects into LB-IPAM's values and writes
// its results back into their status: the pools' and Services'
// conditions, with Cilium's types and reasons, and the Services'
// status.loadBalancer.ingress.
package k8s

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/lbipam"
)

// Annotations a Service asks with, Cilium's names and their older aliases.
var (
	annotationIPs        = []string{"lbipam.cilium.io/ips", "io.cilium/lb-ipam-ips"}
	annotationSharingKey = []string{"lbipam.cilium.io/sharing-key", "io.cilium/lb-ipam-sharing-key"}
	annotationShareWith  = []string{"lbipam.cilium.io/sharing-cross-namespace", "io.cilium/lb-ipam-sharing-cross-namespace"}
)

// Condition types, as Cilium's.
const (
	ConditionSatisfied    = "cilium.io/IPAMRequestSatisfied"
	ConditionIPsTotal     = "cilium.io/IPsTotal"
	ConditionIPsAvailable = "cilium.io/IPsAvailable"
	ConditionIPsUsed      = "cilium.io/IPsUsed"
	ConditionPoolConflict = "cilium.io/PoolConflict"
)

// PoolOf reads a pool. A block that is not a CIDR, an address or a range
// of one family from start to stop is an error naming it.
func PoolOf(p *v2.CiliumLoadBalancerIPPool) (lbipam.Pool, error) {
	out := lbipam.Pool{Name: p.Name, Created: p.CreationTimestamp.Time, Disabled: p.Spec.Disabled}
	allow := p.Spec.AllowFirstLastIPs != v2.AllowFirstLastIPNo
	for i, b := range p.Spec.Blocks {
		r, err := blockRange(b, allow)
		if err != nil {
			return lbipam.Pool{}, fmt.Errorf("pool %s: spec.blocks[%d]: %w", p.Name, i, err)
		}
		out.Ranges = append(out.Ranges, r)
	}
	if sel := p.Spec.ServiceSelector; sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return lbipam.Pool{}, fmt.Errorf("pool %s: spec.serviceSelector: %w", p.Name, err)
		}
		out.Selects = func(l map[string]string) bool { return s.Matches(labels.Set(l)) }
	}
	return out, nil
}

func blockRange(b v2.CiliumLoadBalancerIPPoolIPBlock, allowFirstLast bool) (lbipam.Range, error) {
	if b.Cidr != "" {
		if b.Start != "" || b.Stop != "" {
			return lbipam.Range{}, fmt.Errorf("cidr %q with start or stop: one or the other", b.Cidr)
		}
		p, err := netip.ParsePrefix(string(b.Cidr))
		if err != nil {
			return lbipam.Range{}, fmt.Errorf("cidr: %w", err)
		}
		return lbipam.CIDRRange(p, allowFirstLast), nil
	}
	from, err := netip.ParseAddr(b.Start)
	if err != nil {
		return lbipam.Range{}, fmt.Errorf("start: %w", err)
	}
	to := from
	if b.Stop != "" {
		if to, err = netip.ParseAddr(b.Stop); err != nil {
			return lbipam.Range{}, fmt.Errorf("stop: %w", err)
		}
	}
	if from.BitLen() != to.BitLen() || to.Less(from) {
		return lbipam.Range{}, fmt.Errorf("start %s, stop %s: not a range", from, to)
	}
	return lbipam.Range{From: from, To: to}, nil
}

// Ours says whether LB-IPAM serves svc: a LoadBalancer Service without a
// loadBalancerClass (when defaultIPAM) or with one of classes.
func Ours(svc *corev1.Service, defaultIPAM bool, classes []string) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return defaultIPAM
	}
	return slices.Contains(classes, *svc.Spec.LoadBalancerClass)
}

// ServiceOf reads what LB-IPAM needs of a Service it serves. An address
// it asks for that is not one is an error naming it.
func ServiceOf(svc *corev1.Service) (lbipam.Service, error) {
	n := lbipam.Name{Namespace: svc.Namespace, Name: svc.Name}
	s := lbipam.Service{Name: n, Created: svc.CreationTimestamp.Time, UID: string(svc.UID),
		Labels:        lbipam.ServiceLabels(n, svc.Labels),
		SharingKey:    annotation(svc, annotationSharingKey),
		ExternalLocal: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
	}
	if len(svc.Spec.Selector) > 0 {
		s.Selector = labels.Set(svc.Spec.Selector).String()
	}
	var asked []string
	if svc.Spec.LoadBalancerIP != "" {
		asked = append(asked, svc.Spec.LoadBalancerIP)
	}
	asked = append(asked, list(annotation(svc, annotationIPs))...)
	for _, a := range asked {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return lbipam.Service{}, fmt.Errorf("the address %q asked for: %w", a, err)
		}
		if !slices.Contains(s.Requested, ip) {
			s.Requested = append(s.Requested, ip)
		}
	}
	s.ShareWith = list(annotation(svc, annotationShareWith))
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		s.Ports = append(s.Ports, lbipam.Port{Port: uint16(p.Port), Protocol: string(proto)})
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(ing.IP); err == nil {
			s.Current = append(s.Current, ip)
		}
	}
	return s, nil
}

func annotation(svc *corev1.Service, keys []string) string {
	for _, k := range keys {
		if v, ok := svc.Annotations[k]; ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ServiceStatus is svc's status with a's addresses and condition; false
// when it is what svc has already.
func ServiceStatus(svc *corev1.Service, a lbipam.Assignment) (corev1.ServiceStatus, bool) {
	st := *svc.Status.DeepCopy()
	var ingress []corev1.LoadBalancerIngress
	for _, ip := range a.Addrs {
		ingress = append(ingress, corev1.LoadBalancerIngress{IP: ip.String()})
	}
	changed := !slices.EqualFunc(ingress, st.LoadBalancer.Ingress, func(x, y corev1.LoadBalancerIngress) bool {
		return x.IP == y.IP && y.Hostname == "" && len(y.Ports) == 0 && (y.IPMode == nil || *y.IPMode == corev1.LoadBalancerIPModeVIP)
	})
	st.LoadBalancer.Ingress = ingress
	status := metav1.ConditionFalse
	if a.Satisfied {
		status = metav1.ConditionTrue
	}
	changed = setCondition(&st.Conditions, svc.Generation, ConditionSatisfied, status, a.Reason, a.Message) || changed
	return st, changed
}

// PoolConditions are p's conditions with st's counts and conflict; false
// when they are what p has already.
func PoolConditions(p *v2.CiliumLoadBalancerIPPool, st lbipam.PoolStatus) ([]metav1.Condition, bool) {
	conds := slices.Clone(p.Status.Conditions)
	changed := false
	for _, c := range []struct{ typ, count string }{
		{ConditionIPsTotal, st.Total}, {ConditionIPsAvailable, st.Available}, {ConditionIPsUsed, st.Used},
	} {
		changed = setCondition(&conds, p.Generation, c.typ, metav1.ConditionUnknown, "noreason", c.count) || changed
	}
	conflict, reason := metav1.ConditionFalse, "resolved"
	if st.Conflict {
		conflict, reason = metav1.ConditionTrue, "cidr_overlap"
	}
	changed = setCondition(&conds, p.Generation, ConditionPoolConflict, conflict, reason, st.Message) || changed
	return conds, changed
}

// setCondition sets a condition, its transition time only when its
// status changes; false when nothing changed.
func setCondition(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) bool {
	if c := meta.FindStatusCondition(*conds, typ); c != nil && c.Status == status && c.Reason == reason &&
		c.Message == message && c.ObservedGeneration == generation {
		return false
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation})
	return true
}
