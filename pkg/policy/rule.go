package policy

import (
	"fmt"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Origin names the object a rule came from, so that every verdict can be
// traced back to it.
type Origin struct {
	Kind      string // NetworkPolicy, CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, or a built-in
	Namespace string // empty for cluster-wide kinds
	Name      string
}

// Kinds of origins.
const (
	KindNetworkPolicy = "NetworkPolicy"
	KindCNP           = "CiliumNetworkPolicy"
	KindCCNP          = "CiliumClusterwideNetworkPolicy"
	// KindBuiltin marks rules the agent adds itself: allow-all where no
	// policy isolates an endpoint, the host's access to its pods.
	KindBuiltin = "builtin"
)

func (o Origin) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// Port is what a rule allows or denies of the transport: a protocol (0:
// every protocol, and then no port), a port or a range [Port, EndPort]
// (0: every port; for ICMP the port is the type), or a port by name, which
// each endpoint resolves for itself.
type Port struct {
	Protocol uint8
	Port     uint16
	EndPort  uint16
	Name     string
	// AnyL4, with a port or a name, means the port on TCP, UDP and SCTP
	// (Cilium's protocol ANY).
	AnyL4 bool
}

func (p Port) String() string {
	proto := "any"
	switch {
	case p.AnyL4:
		proto = "ANY"
	case p.Protocol != 0:
		proto = protoName(p.Protocol)
	}
	switch {
	case p.Name != "":
		return proto + "/" + p.Name
	case p.EndPort > p.Port:
		return fmt.Sprintf("%s/%d-%d", proto, p.Port, p.EndPort)
	case p.Port != 0:
		return fmt.Sprintf("%s/%d", proto, p.Port)
	}
	return proto
}

func protoName(p uint8) string {
	switch p {
	case spec.ProtoTCP:
		return "TCP"
	case spec.ProtoUDP:
		return "UDP"
	case spec.ProtoSCTP:
		return "SCTP"
	case spec.ProtoICMP:
		return "ICMP"
	}
	return fmt.Sprintf("proto-%d", p)
}

// Rule is one direction of one policy rule, in the form the engine
// computes with: whom it applies to, which peers and ports it allows or
// denies, and whether it isolates the endpoints it selects.
type Rule struct {
	Origin    Origin
	Subject   Selector
	Direction spec.Direction
	Deny      bool
	// Peers are the remote identities; none means the rule allows or
	// denies nothing (it may still isolate: Cilium's "ingress: [{}]").
	Peers []Selector
	// Ports are what of the peers' traffic the rule covers; none means
	// every protocol and port.
	Ports []Port
	// DefaultDeny isolates the selected endpoints in Direction: what no
	// rule allows is dropped.
	DefaultDeny bool
	// L7 are the layer-7 rules of an allow: its connections go through
	// the proxy, which allows what they allow. nil: no proxy.
	L7 *L7Rules
}

// l4 is one port of a rule resolved to what a policy entry holds.
type l4 struct {
	proto         uint8
	port, endPort uint16
}

// covers says whether the entry this l4 gives matches proto and port.
func (l l4) covers(proto uint8, port uint16) bool {
	return (l.proto == 0 || l.proto == proto) && (l.port == 0 || port >= l.port && port <= max(l.endPort, l.port))
}

// l4s turns a numeric port into the entries' protocols and ports.
func (p Port) l4s() []l4 {
	if p.AnyL4 {
		if p.Port == 0 {
			return []l4{{}}
		}
		return []l4{
			{spec.ProtoTCP, p.Port, p.EndPort},
			{spec.ProtoUDP, p.Port, p.EndPort},
			{spec.ProtoSCTP, p.Port, p.EndPort},
		}
	}
	return []l4{{p.Protocol, p.Port, p.EndPort}}
}

// NamedPort is a container port with a name.
type NamedPort struct {
	Name     string
	Protocol uint8
	Port     uint16
}

// NamedPorts are an endpoint's (or an identity's) container ports by name.
type NamedPorts []NamedPort

// resolve turns a rule's port into entries, looking names up in ports.
// A name nobody has resolves to nothing: the rule then allows nothing.
func (p Port) resolve(ports NamedPorts) []l4 {
	if p.Name == "" {
		return p.l4s()
	}
	var out []l4
	for _, np := range ports {
		if np.Name != p.Name {
			continue
		}
		if p.AnyL4 || p.Protocol == 0 || p.Protocol == np.Protocol {
			out = append(out, l4{np.Protocol, np.Port, 0})
		}
	}
	return out
}

// SameRules reports whether two translations of a policy are the same:
// selectors with equal keys select the same identities.
func SameRules(a, b []Rule) bool {
	return slices.EqualFunc(a, b, func(x, y Rule) bool {
		return x.Origin == y.Origin && x.Subject.Key() == y.Subject.Key() && x.Direction == y.Direction &&
			x.Deny == y.Deny && x.DefaultDeny == y.DefaultDeny && x.L7.Equal(y.L7) && slices.Equal(x.Ports, y.Ports) &&
			slices.EqualFunc(x.Peers, y.Peers, func(p, q Selector) bool { return p.Key() == q.Key() })
	})
}
