package k8s

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// labelServiceProxyName names the proxy that serves a Service; kube-proxy
// (and so this load balancer) serves only Services without it.
const labelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// annotationLBAlgorithm is Cilium's annotation that picks a Service's
// backend selection (random or maglev), read with
// --bpf-lb-algorithm-annotation.
const annotationLBAlgorithm = "service.cilium.io/lb-algorithm"

// ServiceOf reads what the load balancer needs of a Service.
func ServiceOf(svc *corev1.Service) loadbalancer.Service {
	_, otherProxy := svc.Labels[labelServiceProxyName]
	_, headless := svc.Labels[corev1.IsHeadlessService]
	s := loadbalancer.Service{
		Name:       loadbalancer.ServiceName{Namespace: svc.Namespace, Name: svc.Name},
		Type:       loadbalancer.ServiceType(svc.Spec.Type),
		OtherProxy: otherProxy,
		Headless:   headless || svc.Spec.ClusterIP == corev1.ClusterIPNone,
		// Which of two Services claiming a frontend gets it.
		CreationTime: svc.CreationTimestamp.Time,
		UID:          string(svc.UID),
		Labels:       svc.Labels,
		Algorithm:    svc.Annotations[annotationLBAlgorithm],
	}
	if c := svc.Spec.LoadBalancerClass; c != nil {
		s.LoadBalancerClass = *c
	}
	if s.Type == "" {
		s.Type = loadbalancer.TypeClusterIP
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	s.ClusterIPs = addrs(ips)
	s.ExternalIPs = addrs(svc.Spec.ExternalIPs)
	// Whoever wrote the status (a cloud's controller, MetalLB, LB-IPAM),
	// and whatever the loadBalancerClass says: kube-proxy serves the
	// addresses it finds there, on a Service of any type.
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP {
			continue
		}
		s.LoadBalancerIPs = append(s.LoadBalancerIPs, addrs([]string{ing.IP})...)
	}
	s.SourceRanges = sourceRanges(svc.Spec.LoadBalancerSourceRanges)
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, loadbalancer.Port{Name: p.Name, Protocol: protocol(p.Protocol),
			Port: uint16(p.Port), NodePort: uint16(p.NodePort)})
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		s.AffinityTimeout = uint32(corev1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			s.AffinityTimeout = uint32(*c.ClientIP.TimeoutSeconds)
		}
	}
	s.ExternalLocal = svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		(s.Type == loadbalancer.TypeNodePort || s.Type == loadbalancer.TypeLoadBalancer || len(s.ExternalIPs) > 0)
	s.InternalLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	s.HealthCheckNodePort = uint16(svc.Spec.HealthCheckNodePort)
	return s
}

// Endpoints reads an EndpointSlice's IPv4 endpoints.
func Endpoints(es *discoveryv1.EndpointSlice) []loadbalancer.Endpoint {
	if es.AddressType != discoveryv1.AddressTypeIPv4 {
		return nil
	}
	ports := map[loadbalancer.PortKey]uint16{}
	for _, p := range es.Ports {
		if p.Port == nil {
			continue
		}
		k := loadbalancer.PortKey{Protocol: spec.ProtoTCP}
		if p.Name != nil {
			k.Name = *p.Name
		}
		if p.Protocol != nil {
			k.Protocol = protocol(*p.Protocol)
		}
		ports[k] = uint16(*p.Port)
	}
	var out []loadbalancer.Endpoint
	for _, e := range es.Endpoints {
		c := e.Conditions
		ep := loadbalancer.Endpoint{Ports: ports,
			// A nil condition counts as true for ready and serving.
			Ready:       c.Ready == nil || *c.Ready,
			Serving:     c.Serving == nil || *c.Serving,
			Terminating: c.Terminating != nil && *c.Terminating,
		}
		if e.NodeName != nil {
			ep.NodeName = *e.NodeName
		}
		// trafficDistribution and the topology-mode annotation reach
		// the load balancer only as the hints that the EndpointSlice
		// controller writes for them, as they reach kube-proxy.
		if e.Hints != nil {
			for _, n := range e.Hints.ForNodes {
				ep.ForNodes = append(ep.ForNodes, n.Name)
			}
			for _, z := range e.Hints.ForZones {
				ep.ForZones = append(ep.ForZones, z.Name)
			}
		}
		for _, a := range addrs(e.Addresses) {
			ep.Address = a
			out = append(out, ep)
		}
	}
	return out
}

func addrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			out = append(out, a)
		}
	}
	return out
}

// sourceRanges reads loadBalancerSourceRanges as kube-proxy does: the
// IPv4 ones, padded with spaces or not (validation lets it through), and
// none at all when one of them is /0 (it admits every client).
func sourceRanges(ss []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if p.Bits() == 0 {
			return nil
		}
		out = append(out, p.Masked())
	}
	return out
}

func protocol(p corev1.Protocol) uint8 {
	switch p {
	case corev1.ProtocolUDP:
		return spec.ProtoUDP
	case corev1.ProtocolSCTP:
		return spec.ProtoSCTP
	}
	return spec.ProtoTCP
}

// SliceService is the Service an EndpointSlice serves, from its
// kubernetes.io/service-name label; false without one.
func SliceService(es *discoveryv1.EndpointSlice) (loadbalancer.ServiceName, bool) {
	n := es.Labels[discoveryv1.LabelServiceName]
	return loadbalancer.ServiceName{Namespace: es.Namespace, Name: n}, n != ""
}

// serviceName is a Service's own name.
func serviceName(svc *corev1.Service) (loadbalancer.ServiceName, bool) {
	return loadbalancer.ServiceName{Namespace: svc.Namespace, Name: svc.Name}, true
}
