package policy

import (
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// HealthPort is the health endpoint's responder port, Cilium's 4240.
const HealthPort = 4240

// OriginHealthEndpoint is the health endpoint's own rule.
var OriginHealthEndpoint = Origin{Kind: KindBuiltin, Name: "health-endpoint"}

// healthEndpointRules isolate the health endpoint at ingress: only the
// probes reach it, ICMP echo requests and TCP 4240 from the nodes (host,
// remote-node) and from other health endpoints. A pod has no business
// there, and would learn from it which nodes are up. Rules selecting
// reserved:health can allow more, as in Cilium.
func healthEndpointRules() []Rule {
	health := IdentitySet{Name: "reserved:health", IDs: []identity.NumericIdentity{identity.Health}}
	probers := IdentitySet{Name: "health-probers", IDs: []identity.NumericIdentity{identity.Host, identity.RemoteNode, identity.Health}}
	return []Rule{{
		Origin: OriginHealthEndpoint, Subject: health, Direction: spec.Ingress, DefaultDeny: true,
		Peers: []Selector{probers},
		Ports: []Port{{Protocol: spec.ProtoTCP, Port: HealthPort}, {Protocol: spec.ProtoICMP, Port: icmpEchoRequest}},
	}}
}

// icmpEchoRequest is ICMP's type 8: for ICMP a rule's port is the type.
const icmpEchoRequest = 8
