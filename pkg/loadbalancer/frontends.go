package loadbalancer

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// Addr is an address, port and protocol: a frontend's or a backend's.
type Addr struct {
	Address  netip.Addr
	Port     uint16
	Protocol uint8
}

func (a Addr) String() string {
	return spec.Frontend{Address: a.Address, Port: a.Port, Protocol: a.Protocol}.String()
}

func compareAddrs(a, b Addr) int {
	return cmp.Or(a.Address.Compare(b.Address), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}

// Backend is an endpoint's address and port as a frontend uses it.
type Backend struct {
	Addr
	NodeName string
	// Terminating backends keep their connections; they are in a
	// frontend's slots only when nothing else serves.
	Terminating bool
}

// Frontend is an address:port/protocol that clients connect to, and the
// backends that serve it.
type Frontend struct {
	Addr
	Service  ServiceName
	PortName string
	// Flags: the frontend's kind (spec.LBNodePort, spec.LBExternalIP;
	// none for a ClusterIP), spec.LBAffinity, spec.LBLocal for an
	// external kind with externalTrafficPolicy Local, and with two
	// scopes spec.LBTwoScopes.
	Flags           spec.LBFlags
	AffinityTimeout uint32
	// Slots are the backends new connections go to: every client's, or
	// with spec.LBTwoScopes the external clients'. InternalSlots are the
	// local pods' and the node's with spec.LBTwoScopes.
	Slots         []Backend
	InternalSlots []Backend
	// Backends are all the frontend's backends in the datapath: those of
	// its slots and the terminating ones that finish their connections.
	Backends []Backend
	// SourceRanges are the clients a frontend with spec.LBSourceRange
	// admits (SourceRanges of the Service's); nil without the flag.
	SourceRanges []netip.Prefix
}

// Kind names the frontend's type for people.
func (f Frontend) Kind() string {
	switch {
	case f.Flags&spec.LBNodePort != 0:
		return "NodePort"
	case f.Flags&spec.LBExternalIP != 0:
		return "ExternalIP"
	case f.Flags&spec.LBHostPort != 0:
		return "HostPort"
	case f.Flags&spec.LBLoadBalancer != 0:
		return "LoadBalancer"
	}
	return "ClusterIP"
}

// FrontendAddress says whether a may be a frontend. A Service's
// ExternalIPs are whatever its author wrote: the loopback, link-local
// (the datapath's hairpin source, 169.254.42.1, among them), multicast,
// broadcast and unspecified addresses would let it take over traffic no
// Service may own, so they never become frontends.
func FrontendAddress(a netip.Addr) bool {
	return a.Is4() && a.IsGlobalUnicast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// Ours says whether this load balancer serves s: kube-proxy leaves alone
// headless and ExternalName services and those that name another proxy.
func Ours(s Service) bool {
	return s.Type != TypeExternalName && !s.Headless && !s.OtherProxy
}

// Frontends computes s's frontends from its endpoints, as kube-proxy
// would on the node local:
//   - a port's backends are the endpoints that give it a port number and
//     are ready, or when none is, those serving while they terminate;
//   - where a traffic policy is Cluster, the endpoints' topology hints
//     narrow them to the ready ones hinted for this node, or else for its
//     zone, when every ready one has such hints and one is near
//     (trafficDistribution PreferSameNode, PreferSameZone, PreferClose,
//     the topology-mode annotation; see topologyOf);
//   - ClusterIPs serve local clients: internalTrafficPolicy Local
//     narrows them to this node's backends, whatever their hints;
//   - ExternalIPs, LoadBalancer addresses and NodePorts (on every node
//     address) also serve clients from outside: externalTrafficPolicy
//     Local narrows those to this node's backends, and then, as whenever
//     the two policies differ, local clients have their own scope;
//   - with Maglev (local.Maglev), those that serve clients from outside
//     (not HostPorts: their one backend is the pod) pick a flow's
//     backend by the frontend's Maglev table (spec.LBMaglev);
//   - loadBalancerSourceRanges fence the LoadBalancer addresses, as
//     kube-proxy fences them, and with local.SourceRangeAllTypes
//     (--bpf-lb-source-range-all-types) the NodePorts and ExternalIPs
//     too: only clients in a range may use them (spec.LBSourceRange),
//     local pods and the node itself included, by their own address;
//   - a NodePort at another node's address (spec.AnyNode) serves local
//     clients, as the local clients' scope of its own NodePorts;
//   - a pod's HostPorts (TypeHostPort) are at the node's addresses, or
//     at the hostIP when it is one of them; the pod, their one endpoint,
//     serves them whatever its readiness (HostPortService presents it as
//     ready while it has an address, as portmap maps a pod's ports for
//     as long as its sandbox has a network).
func Frontends(s Service, eps []Endpoint, local Local) []Frontend {
	if !Ours(s) {
		return nil
	}
	var out []Frontend
	maglev := local.Maglev(s)
	for _, p := range s.Ports {
		cands := candidates(p, eps)
		all := clusterBackends(cands, local)
		onNode := usable(filter(cands, func(b candidate) bool { return b.NodeName == local.NodeName }))
		internal, external := all, all
		if s.InternalLocal {
			internal = onNode
		}
		if s.ExternalLocal {
			external = onNode
		}
		base := Frontend{Service: s.Name, PortName: p.Name, Backends: kept(cands, internal, external)}
		if s.AffinityTimeout > 0 {
			base.Flags |= spec.LBAffinity
			base.AffinityTimeout = s.AffinityTimeout
		}
		ranges := SourceRanges(s.SourceRanges)
		fence := func(f *Frontend, kind spec.LBFlags) {
			if len(ranges) > 0 && (kind == spec.LBLoadBalancer ||
				local.SourceRangeAllTypes && (kind == spec.LBNodePort || kind == spec.LBExternalIP)) {
				f.Flags |= spec.LBSourceRange
				f.SourceRanges = ranges
			}
		}
		add := func(addr netip.Addr, port uint16, kind spec.LBFlags, slots, internalSlots []Backend) {
			if !(FrontendAddress(addr) || kind == spec.LBHostPort && hostLoopback(addr)) || port == 0 {
				return
			}
			f := base
			f.Addr = Addr{Address: addr, Port: port, Protocol: p.Protocol}
			f.Flags |= kind
			f.Slots = slots
			// The datapath keeps a Local scope's clients' addresses and
			// drops, rather than refuses, when it has no backend.
			if kind != 0 && s.ExternalLocal {
				f.Flags |= spec.LBLocal
			}
			if internalSlots != nil {
				f.Flags |= spec.LBTwoScopes
				f.InternalSlots = internalSlots
			}
			if maglev && kind&(spec.LBNodePort|spec.LBExternalIP|spec.LBLoadBalancer) != 0 {
				f.Flags |= spec.LBMaglev
			}
			fence(&f, kind)
			out = append(out, f)
		}
		// Outside clients and local ones differ only when one policy
		// is Local and the other is not.
		var twoScopes []Backend
		if s.ExternalLocal != s.InternalLocal {
			twoScopes = orEmpty(internal)
		}
		for _, ip := range s.ClusterIPs {
			add(ip, p.Port, 0, internal, nil)
		}
		for _, ip := range s.ExternalIPs {
			add(ip, p.Port, spec.LBExternalIP, external, twoScopes)
		}
		for _, ip := range s.LoadBalancerIPs {
			add(ip, p.Port, spec.LBLoadBalancer, external, twoScopes)
		}
		if p.NodePort != 0 && (s.Type == TypeNodePort || s.Type == TypeLoadBalancer) {
			for _, ip := range local.Addresses {
				add(ip, p.NodePort, spec.LBNodePort, external, twoScopes)
			}
			f := base
			f.Addr = Addr{Address: spec.AnyNode, Port: p.NodePort, Protocol: p.Protocol}
			f.Flags |= spec.LBNodePort
			f.Slots = orEmpty(internal)
			fence(&f, spec.LBNodePort)
			out = append(out, f)
		}
		if s.Type == TypeHostPort {
			for _, ip := range hostPortAddrs(p.HostIP, local.Addresses) {
				add(ip, p.Port, spec.LBHostPort, all, nil)
			}
		}
	}
	// Of two ports at the same address the first one declared serves, as
	// the first of portmap's rules that matches does.
	slices.SortStableFunc(out, func(a, b Frontend) int { return compareAddrs(a.Addr, b.Addr) })
	return slices.CompactFunc(out, func(a, b Frontend) bool { return a.Addr == b.Addr })
}

// hostPortAddrs are the addresses a hostPort bound to hostIP listens on,
// as portmap maps them: every node address and the loopback when hostIP
// is unset or unspecified (portmap matches any local destination), else
// hostIP when it is the node's or a loopback address; an address that is
// not the node's receives nothing for it. A frontend at a loopback
// address serves the node's own processes only (socket-level balancing
// in the node's network namespace), as portmap's DNAT of the loopback
// does in the node's OUTPUT chain.
func hostPortAddrs(hostIP netip.Addr, node []netip.Addr) []netip.Addr {
	if !hostIP.IsValid() || hostIP.IsUnspecified() {
		return append(slices.Clone(node), netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	if slices.Contains(node, hostIP) || hostLoopback(hostIP) {
		return []netip.Addr{hostIP}
	}
	return nil
}

// hostLoopback says whether a is an IPv4 loopback address, where only a
// HostPort may have a frontend.
func hostLoopback(a netip.Addr) bool { return a.Is4() && a.IsLoopback() }

// orEmpty keeps an empty scope apart from no scope.
func orEmpty(b []Backend) []Backend {
	if b == nil {
		return []Backend{}
	}
	return b
}

type candidate struct {
	Backend
	ready, serving     bool
	forNodes, forZones []string
}

// candidates are the endpoints that give port p a number, once each.
func candidates(p Port, eps []Endpoint) []candidate {
	var out []candidate
	seen := map[Addr]bool{}
	for _, e := range eps {
		port, ok := e.Ports[PortKey{Name: p.Name, Protocol: p.Protocol}]
		if !ok || port == 0 || !e.Address.Is4() {
			continue
		}
		a := Addr{Address: e.Address, Port: port, Protocol: p.Protocol}
		if seen[a] {
			continue
		}
		seen[a] = true
		out = append(out, candidate{Backend: Backend{Addr: a, NodeName: e.NodeName, Terminating: e.Terminating},
			ready: e.Ready, serving: e.Serving, forNodes: e.ForNodes, forZones: e.ForZones})
	}
	slices.SortFunc(out, func(a, b candidate) int { return compareAddrs(a.Addr, b.Addr) })
	return out
}

func filter(cs []candidate, keep func(candidate) bool) []candidate {
	var out []candidate
	for _, c := range cs {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// usable are the ready candidates, or when none is ready, the ones that
// serve while terminating: kube-proxy's choice.
func usable(cs []candidate) []Backend {
	var ready, terminating []Backend
	for _, c := range cs {
		switch {
		case c.ready: // publishNotReadyAddresses: ready while terminating
			ready = append(ready, c.Backend)
		case c.serving && c.Terminating:
			terminating = append(terminating, c.Backend)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// kept are the backends the datapath keeps: those in slots, and those
// serving while they terminate, whose connections go on.
func kept(cs []candidate, slots ...[]Backend) []Backend {
	in := map[Addr]bool{}
	for _, s := range slots {
		for _, b := range s {
			in[b.Addr] = true
		}
	}
	var out []Backend
	for _, c := range cs {
		if in[c.Addr] || (c.serving && c.Terminating) {
			out = append(out, c.Backend)
		}
	}
	return out
}

func (f Frontend) String() string {
	return fmt.Sprintf("%s %s %s", f.Addr, f.Kind(), f.Service)
}

// SourceRanges are the prefixes the datapath holds for ranges: each
// once, and none that another one holds (a client in it is in the other
// one too), in address order. Prefixes nest or are apart, so in address
// order (the longer of two at one address later) a prefix is held by
// another exactly when the last one kept holds it: one pass, whatever
// the Service's author wrote.
func SourceRanges(ranges []netip.Prefix) []netip.Prefix {
	ps := make([]netip.Prefix, 0, len(ranges))
	for _, p := range ranges {
		if p.Addr().Is4() {
			ps = append(ps, p.Masked())
		}
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	var out []netip.Prefix
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	return out
}
