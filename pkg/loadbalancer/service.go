// Package loadbalancer is the agent's kube-proxy replacement: it turns
// Services and their endpoints into the frontends and backends the
// datapath balances connections over, keeps them in statedb tables, and
// registers the reconcilers that write them into the service maps.
//
// Services come in as plain values (Service, Endpoint) read out of
// tables through an Intake (pkg/loadbalancer/k8s makes one from the
// Kubernetes tables); the controller follows the tables' changes and
// rewrites the services they touch. What Kubernetes defines about them
// (which endpoints serve, traffic policies, affinity) is decided here, in
// Frontends, a pure function.
package loadbalancer

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// ServiceName names a Service: namespace/name.
type ServiceName struct {
	Namespace, Name string
}

func (n ServiceName) String() string { return n.Namespace + "/" + n.Name }

// ServiceType is a Service's spec.type.
type ServiceType string

const (
	TypeClusterIP    ServiceType = "ClusterIP"
	TypeNodePort     ServiceType = "NodePort"
	TypeLoadBalancer ServiceType = "LoadBalancer"
	TypeExternalName ServiceType = "ExternalName"
	// TypeHostPort is no Kubernetes type: it is a pod's hostPorts, which
	// the load balancer serves as the portmap CNI plugin would, as a
	// service of its own named by HostPortName.
	TypeHostPort ServiceType = "HostPort"
)

// hostPortPrefix starts the name of a pod's HostPort service. A
// Service's name is a DNS label, which has no colon, so the two can
// never meet.
const hostPortPrefix = "hostport:"

// HostPortName names the HostPort service of the pod namespace/pod.
func HostPortName(namespace, pod string) ServiceName {
	return ServiceName{Namespace: namespace, Name: hostPortPrefix + pod}
}

// HostPortPod is the pod whose HostPort service n names; false when n
// names a Service.
func (n ServiceName) HostPortPod() (string, bool) {
	return strings.CutPrefix(n.Name, hostPortPrefix)
}

// Service is what the load balancer needs of a Kubernetes Service.
type Service struct {
	Name ServiceName
	Type ServiceType
	// ClusterIPs are the service's cluster addresses; none for a
	// headless service.
	ClusterIPs []netip.Addr
	// Headless: clusterIP None, or the service.kubernetes.io/headless
	// label (any value), which kube-proxy leaves alone too.
	Headless    bool
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are the addresses of status.loadBalancer.ingress
	// that reach the nodes as themselves (ipMode VIP, the default):
	// frontends on every node, as ExternalIPs are. An address whose
	// ipMode is Proxy is not one: its load balancer sends the traffic on
	// to a node's address, and clients in the cluster must go through it
	// too, so kube-proxy leaves it alone, and so does this.
	LoadBalancerIPs []netip.Addr
	// SourceRanges are spec.loadBalancerSourceRanges, the clients its
	// LoadBalancer addresses admit; none (or one of /0) admits all.
	SourceRanges []netip.Prefix
	Ports        []Port
	// AffinityTimeout is sessionAffinity ClientIP's timeout in seconds;
	// 0: no affinity.
	AffinityTimeout uint32
	// ExternalLocal: externalTrafficPolicy Local. InternalLocal:
	// internalTrafficPolicy Local.
	ExternalLocal bool
	InternalLocal bool
	// HealthCheckNodePort is where the node answers load balancers'
	// health checks; 0: nowhere.
	HealthCheckNodePort uint16
	// OtherProxy: the service.kubernetes.io/service-proxy-name label is
	// set, to any value (even empty): the service is the proxy's it names,
	// not ours, as kube-proxy leaves it.
	OtherProxy bool
	// CreationTime and UID are the object's (the pod's for a HostPort
	// service): of two services that claim one frontend, the older one
	// gets it, the same on every node (see Owner).
	CreationTime time.Time
	UID          string
	// Labels and LoadBalancerClass are the Service's, for those who
	// select Services (L2 announcements); the load balancer reads
	// neither.
	Labels            map[string]string
	LoadBalancerClass string
	// Algorithm is the service.cilium.io/lb-algorithm annotation: random
	// or maglev, which Local.Maglev follows when the agent lets it.
	Algorithm string
}

// Port is one of a Service's ports.
type Port struct {
	Name     string
	Protocol uint8 // spec.ProtoTCP, ...
	Port     uint16
	NodePort uint16
	// HostIP is the address a HostPort is bound to (Port is the
	// hostPort); invalid: every node address.
	HostIP netip.Addr
}

// String is "name:port/protocol", with ">nodePort" when there is one.
func (p Port) String() string {
	s := fmt.Sprintf("%d/%s", p.Port, spec.ProtocolName(p.Protocol))
	if p.Name != "" {
		s = p.Name + ":" + s
	}
	if p.NodePort != 0 {
		s += fmt.Sprintf(">%d", p.NodePort)
	}
	return s
}

// Endpoint is one address of a Service's EndpointSlices, with the ports
// the slice gives it by port name.
type Endpoint struct {
	Address  netip.Addr
	NodeName string
	// Ports by the Service port's name, with protocol.
	Ports map[PortKey]uint16
	// Conditions as EndpointSlices define them: Ready (nil counts as
	// true), Serving, Terminating.
	Ready, Serving, Terminating bool
	// ForNodes and ForZones are the topology hints' node and zone
	// names (see topologyOf).
	ForNodes, ForZones []string
}

// PortKey names an endpoint port: the Service port's name and protocol.
type PortKey struct {
	Name     string
	Protocol uint8
}

// Local is what the load balancer knows of its own node, and how it
// serves there.
type Local struct {
	NodeName string
	// Addresses are the node's addresses that NodePorts listen on.
	Addresses []netip.Addr
	// SourceRangeAllTypes: loadBalancerSourceRanges fence a Service's
	// NodePorts and ExternalIPs too, not only its LoadBalancer
	// addresses (--bpf-lb-source-range-all-types).
	SourceRangeAllTypes bool
	// Zone is the node's topology.kubernetes.io/zone label; "" without
	// one.
	Zone string
	// Algorithm picks the backends of connections from outside
	// (--bpf-lb-algorithm), unless AlgorithmAnnotation lets a Service's
	// annotation pick its own (--bpf-lb-algorithm-annotation).
	Algorithm           string
	AlgorithmAnnotation bool
}

// Maglev says whether s's frontends that serve clients from outside pick
// backends by Maglev tables: the agent's algorithm, or the Service's
// annotation when the agent lets it and it names one (else it is
// ignored, as Cilium ignores it; see BadAlgorithm).
func (l Local) Maglev(s Service) bool {
	alg := l.Algorithm
	if l.AlgorithmAnnotation && (s.Algorithm == AlgorithmRandom || s.Algorithm == AlgorithmMaglev) {
		alg = s.Algorithm
	}
	return alg == AlgorithmMaglev
}

// BadAlgorithm says what is wrong with s's lb-algorithm annotation when
// the agent reads it and it names no algorithm; "" when nothing is.
func (l Local) BadAlgorithm(s Service) string {
	if !l.AlgorithmAnnotation || s.Algorithm == "" || s.Algorithm == AlgorithmRandom || s.Algorithm == AlgorithmMaglev {
		return ""
	}
	return fmt.Sprintf("annotation service.cilium.io/lb-algorithm %q names no algorithm (random or maglev): --bpf-lb-algorithm=%s serves it",
		s.Algorithm, l.Algorithm)
}

func (s Service) String() string { return fmt.Sprintf("%s (%s)", s.Name, s.Type) }
