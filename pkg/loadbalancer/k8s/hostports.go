package k8s

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/pkg/loadbalancer"
)

// HostPortService reads a pod's hostPorts as a service of type HostPort,
// with the pod as its one endpoint: what the portmap CNI plugin maps for
// the pod's sandbox, which the kubelet gives the ports of the pod's
// (regular) containers that name a hostPort. False when nothing is
// mapped: the pod has no hostPort, runs in the host's network (its ports
// are the node's already), is on another node, has no IPv4 address yet,
// or has finished (its sandbox is gone).
//
// The pod serves whether or not it is ready: portmap maps a pod for as
// long as its sandbox has a network, readiness aside.
func HostPortService(pod *corev1.Pod, nodeName string) (loadbalancer.Service, []loadbalancer.Endpoint, bool) {
	if pod.Spec.NodeName != nodeName || pod.Spec.HostNetwork ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return loadbalancer.Service{}, nil, false
	}
	ip := podIPv4(pod)
	if !ip.IsValid() {
		return loadbalancer.Service{}, nil, false
	}
	svc := loadbalancer.Service{Name: loadbalancer.HostPortName(pod.Namespace, pod.Name), Type: loadbalancer.TypeHostPort,
		CreationTime: pod.CreationTimestamp.Time, UID: string(pod.UID)}
	ep := loadbalancer.Endpoint{Address: ip, NodeName: nodeName, Ports: map[loadbalancer.PortKey]uint16{},
		Ready: true, Serving: true}
	for _, p := range hostPorts(pod) {
		// The API server accepts 0.0.0.0 and an empty hostIP alike;
		// both are every node address.
		hostIP, err := netip.ParseAddr(p.HostIP)
		if err != nil || hostIP.IsUnspecified() {
			hostIP = netip.Addr{}
		}
		if hostIP.IsValid() && !hostIP.Is4() {
			continue
		}
		// The port's name is its host side, which is unique in the pod:
		// "8080", or "10.0.0.1:8080" with a hostIP.
		name := strconv.Itoa(int(p.HostPort))
		if hostIP.IsValid() {
			name = netip.AddrPortFrom(hostIP, uint16(p.HostPort)).String()
		}
		k := loadbalancer.PortKey{Name: name, Protocol: protocol(p.Protocol)}
		if _, dup := ep.Ports[k]; dup {
			continue // the first one declared is mapped
		}
		ep.Ports[k] = uint16(p.ContainerPort)
		svc.Ports = append(svc.Ports, loadbalancer.Port{Name: name, Protocol: k.Protocol, Port: uint16(p.HostPort),
			HostIP: hostIP})
	}
	if len(svc.Ports) == 0 {
		return loadbalancer.Service{}, nil, false
	}
	return svc, []loadbalancer.Endpoint{ep}, true
}

// hostPorts are the ports of the pod's containers that name a hostPort.
func hostPorts(pod *corev1.Pod) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 && p.HostPort <= 0xffff && p.ContainerPort > 0 && p.ContainerPort <= 0xffff {
				out = append(out, p)
			}
		}
	}
	return out
}

// PodService is the HostPort service a pod touches: its own while it
// names a hostPort, none otherwise. Whether the service is mapped is
// HostPortService's to say.
func PodService(pod *corev1.Pod) (loadbalancer.ServiceName, bool) {
	return loadbalancer.HostPortName(pod.Namespace, pod.Name), len(hostPorts(pod)) > 0
}

// podIPv4 is the pod's first IPv4 address, invalid while it has none.
func podIPv4(pod *corev1.Pod) netip.Addr {
	ips := []string{pod.Status.PodIP}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a
		}
	}
	return netip.Addr{}
}
