package ciliumendpoint

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// CiliumEndpoint is what other nodes learn about a local endpoint: its
// identity and where it lives. It has the pod's name and namespace and is
// owned by the pod, so it goes when the pod goes even if this agent is
// down. id may be nil while the endpoint has only a reserved identity.
func CiliumEndpoint(pod *corev1.Pod, ep endpoint.Endpoint, id *identity.Identity, nodeIP netip.Addr) *v2.CiliumEndpoint {
	yes := true
	cep := &v2.CiliumEndpoint{
		TypeMeta: metav1.TypeMeta{APIVersion: v2.SchemeGroupVersion.String(), Kind: "CiliumEndpoint"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Labels:    pod.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, BlockOwnerDeletion: &yes,
			}},
		},
		Status: v2.EndpointStatus{
			ID:             int64(ep.ID),
			Identity:       &v2.EndpointIdentity{ID: int64(ep.Identity)},
			State:          "ready",
			NamedPorts:     NamedPorts(pod),
			ServiceAccount: pod.Spec.ServiceAccountName,
			Networking: &v2.EndpointNetworking{
				Addressing: v2.AddressPairList{{IPV4: ep.IPv4.String()}},
			},
		},
	}
	if id != nil && id.ID == ep.Identity {
		cep.Status.Identity.Labels = id.Labels.Strings()
	}
	if nodeIP.IsValid() {
		cep.Status.Networking.NodeIP = nodeIP.String()
	}
	return cep
}

// NamedPorts are the pod's container ports that have a name: the
// policy engine resolves named ports with them, other nodes' through the
// CiliumEndpoint.
func NamedPorts(pod *corev1.Pod) []v2.NamedPort {
	var out []v2.NamedPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "" || p.ContainerPort <= 0 || p.ContainerPort > 65535 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out = append(out, v2.NamedPort{Name: p.Name, Port: uint16(p.ContainerPort), Protocol: string(proto)})
		}
	}
	return out
}
