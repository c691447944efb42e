package ciliumapi

import (
	"fmt"
	"net/netip"
	"strings"

	cm "github.com/cilium/cilium/api/v1/models"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// Services are svcs in Cilium's Service model, numbered from 1 in their
// order. A service that the datapath holds (status Done, with its age) is
// realized.
func Services(svcs []models.Service) ([]*cm.Service, error) {
	out := make([]*cm.Service, 0, len(svcs))
	for i, s := range svcs {
		spec, err := serviceSpec(int64(i+1), s)
		if err != nil {
			return nil, err
		}
		svc := &cm.Service{Spec: spec, Status: &cm.ServiceStatus{}}
		if s.Status == "Done" || strings.HasPrefix(s.Status, "Done ") {
			svc.Status.Realized = spec
		}
		out = append(out, svc)
	}
	return out, nil
}

func serviceSpec(id int64, s models.Service) (*cm.ServiceSpec, error) {
	addr, proto, ok := strings.Cut(s.Frontend, "/")
	if !ok {
		return nil, fmt.Errorf("service %s: frontend %q: want address:port/protocol", s.Service, s.Frontend)
	}
	fe, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("service %s: frontend %q: %w", s.Service, s.Frontend, err)
	}
	proto = strings.ToLower(proto)
	spec := &cm.ServiceSpec{ID: id,
		FrontendAddress:  &cm.FrontendAddress{IP: fe.Addr().String(), Port: fe.Port(), Protocol: proto, Scope: cm.FrontendAddressScopeExternal},
		BackendAddresses: make([]*cm.BackendAddress, 0, len(s.Backends)),
		Flags: &cm.ServiceSpecFlags{Type: serviceType(s.Type), ExtTrafficPolicy: s.ExternalTrafficPolicy,
			IntTrafficPolicy: s.InternalTrafficPolicy, TrafficPolicy: s.ExternalTrafficPolicy}}
	spec.Flags.Namespace, spec.Flags.Name, _ = strings.Cut(s.Service, "/")
	for _, b := range s.Backends {
		be, err := netip.ParseAddrPort(b.Address)
		if err != nil {
			return nil, fmt.Errorf("service %s: backend %q: %w", s.Service, b.Address, err)
		}
		ip := be.Addr().String()
		spec.BackendAddresses = append(spec.BackendAddresses, &cm.BackendAddress{IP: &ip, Port: be.Port(),
			Protocol: proto, NodeName: b.NodeName, State: backendState(b.State)})
	}
	return spec, nil
}

// serviceType is Cilium's name of a frontend's type.
func serviceType(t string) string {
	if t == "ExternalIP" {
		return cm.ServiceSpecFlagsTypeExternalIPs
	}
	return t
}

// backendState is Cilium's name of a backend's state: a draining backend
// takes no new connections, as Cilium's terminating-not-serving.
func backendState(s string) string {
	if s == "draining" {
		return cm.BackendAddressStateTerminatingDashNotDashServing
	}
	return s
}

// Nodes are the cluster's nodes in Cilium's NodeElement model, named
// cluster/node as Cilium names them; the local node's source is "local",
// the others' "custom-resource" (their CiliumNode).
func Nodes(cluster string, nodes []models.Node) []*cm.NodeElement {
	out := make([]*cm.NodeElement, 0, len(nodes))
	for _, n := range nodes {
		src := "custom-resource"
		if n.Local {
			src = "local"
		}
		out = append(out, &cm.NodeElement{Name: cluster + "/" + n.Name, Source: src,
			PrimaryAddress:     &cm.NodeAddressing{IPv4: &cm.NodeAddressingElement{Enabled: true, IP: n.IPv4, AllocRange: n.PodCIDR}},
			SecondaryAddresses: []*cm.NodeAddressingElement{}})
	}
	return out
}

// Policy is p in Cilium's Policy model, whose shape ours has.
func Policy(p models.Policy) *cm.Policy {
	return &cm.Policy{Policy: p.Policy, Revision: int64(p.Revision)}
}
