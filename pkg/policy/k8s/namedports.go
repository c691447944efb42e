package k8s

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium-go/cilium/pkg/policy"
)

// NamedPorts reads a CiliumEndpoint's named ports; the protocols are
// Kubernetes' names.
func NamedPorts(ports []v2.NamedPort) policy.NamedPorts {
	var out policy.NamedPorts
	for _, p := range ports {
		proto, ok := k8sProtocol(corev1.Protocol(p.Protocol))
		if ok && p.Name != "" && p.Port != 0 {
			out = append(out, policy.NamedPort{Name: p.Name, Protocol: proto, Port: p.Port})
		}
	}
	return out
}

func k8sProtocol(p corev1.Protocol) (uint8, bool) {
	switch p {
	case "", corev1.ProtocolTCP:
		return spec.ProtoTCP, true
	case corev1.ProtocolUDP:
		return spec.ProtoUDP, true
	case corev1.ProtocolSCTP:
		return spec.ProtoSCTP, true
	}
	return 0, false
}
