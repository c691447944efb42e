// Package k8stest builds the Kubernetes and Cilium objects that tests
// feed to fake clientsets, each with the fields the agent reads and
// tweak functions for the rest (as kube-proxy's tests do).
package k8stest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v2 "github.com/cilium-go/cilium/pkg/k8s/apis/cilium.io/v2"
)

// Pod is pod ns/name on node-a, labelled app=name.
func Pod(ns, name string, tweaks ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
			Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{ServiceAccountName: "default", NodeName: "node-a"},
	}
	for _, t := range tweaks {
		t(p)
	}
	return p
}

// Namespace is namespace name with labels ls.
func Namespace(name string, ls map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ls}}
}

// Node is node name with InternalIP ip and pod CIDR podCIDR; empty
// strings leave them out.
func Node(name, ip, podCIDR string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: name},
			{Type: corev1.NodeInternalIP, Address: ip},
		}
	}
	if podCIDR != "" {
		n.Spec.PodCIDR = podCIDR
		n.Spec.PodCIDRs = []string{podCIDR}
	}
	return n
}

// CiliumNode is CiliumNode name with InternalIP ip and the pod CIDRs the
// operator's cluster-pool IPAM gave it.
func CiliumNode(name, ip string, podCIDRs ...string) *v2.CiliumNode {
	n := &v2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.Addresses = []v2.NodeAddress{{Type: v2.NodeInternalIP, IP: ip}}
	n.Spec.IPAM.PodCIDRs = podCIDRs
	return n
}

// CiliumEndpoint is ns/name with address ip on the node at address node,
// of identity id.
func CiliumEndpoint(ns, name, ip, node string, id int64) *v2.CiliumEndpoint {
	return &v2.CiliumEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: v2.EndpointStatus{
			Identity:   &v2.EndpointIdentity{ID: id},
			Networking: &v2.EndpointNetworking{Addressing: v2.AddressPairList{{IPV4: ip}}, NodeIP: node},
		},
	}
}
