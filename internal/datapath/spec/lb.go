package spec

import (
	"errors"
	"fmt"
	"net/netip"
)

// AnyNode is the address of the frontends that serve a NodePort at every
// node's address that has no frontend of its own on this node (another
// node's): the datapath translates a local client's connection to one
// where it starts, so that policy judges the backend and not the node.
// Cilium calls them the NodePort's surrogate.
var AnyNode = netip.IPv4Unspecified()

// BackendID names a backend in the datapath. The control plane gives
// one to every distinct (address, port, protocol) that some service uses;
// 0 is no backend.
type BackendID uint32

// Backend is an address a service's connections may be sent to.
type Backend struct {
	ID       BackendID
	Address  netip.Addr
	Port     uint16
	Protocol uint8
	// Terminating backends keep the connections they have; the control
	// plane gives them slots only when nothing else serves.
	Terminating bool
}

// Validate says what is wrong with b, naming the field.
func (b Backend) Validate() error {
	switch {
	case b.ID == 0:
		return errors.New("backend: id 0 is reserved")
	case !b.Address.Is4():
		return fmt.Errorf("backend %d: address %s: only IPv4 is supported", b.ID, b.Address)
	case b.Port == 0:
		return fmt.Errorf("backend %d: port 0", b.ID)
	case b.Protocol != ProtoTCP && b.Protocol != ProtoUDP && b.Protocol != ProtoSCTP:
		return fmt.Errorf("backend %d: protocol %d: want TCP, UDP or SCTP", b.ID, b.Protocol)
	}
	return nil
}

// LBScope says which clients a frontend's entries serve; see LBTwoScopes.
type LBScope uint8

const (
	// ScopeExternal serves every client, or with LBTwoScopes only the
	// clients from outside the node.
	ScopeExternal LBScope = 0
	// ScopeInternal serves local pods and the node itself when the
	// external entry has LBTwoScopes.
	ScopeInternal LBScope = 1
)

// LBFlags describe a frontend. The numbers are bpf/lib/lb.h's enum lb_flags.
type LBFlags uint16

const (
	LBNodePort     LBFlags = 1
	LBExternalIP   LBFlags = 2
	LBHostPort     LBFlags = 4
	LBLoadBalancer LBFlags = 8
	LBAffinity     LBFlags = 16
	// LBTwoScopes: internal clients are served by the ScopeInternal
	// entries of the same frontend.
	LBTwoScopes LBFlags = 32
	// LBLocal: only this node's backends serve the scope, and the
	// client's address is kept.
	LBLocal LBFlags = 64
	// LBSourceRange: only clients whose address is in one of the
	// frontend's source ranges (SourceRange, by RevNATIndex) may use it.
	LBSourceRange LBFlags = 128
	// LBMaglev: clients from outside get their backend from the
	// frontend's Maglev table (Service.Maglev), by a hash of the flow.
	LBMaglev LBFlags = 256
)

// Names are the flags' names: nodeport, externalip, hostport,
// loadbalancer, affinity, two-scopes, local, source-range, maglev.
func (f LBFlags) Names() []string {
	out := []string{}
	for _, n := range []struct {
		bit  LBFlags
		name string
	}{
		{LBNodePort, "nodeport"}, {LBExternalIP, "externalip"}, {LBHostPort, "hostport"},
		{LBLoadBalancer, "loadbalancer"}, {LBAffinity, "affinity"}, {LBTwoScopes, "two-scopes"}, {LBLocal, "local"},
		{LBSourceRange, "source-range"}, {LBMaglev, "maglev"},
	} {
		if f&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Frontend is what a client connects to.
type Frontend struct {
	Address  netip.Addr
	Port     uint16
	Protocol uint8
	Scope    LBScope
}

// ProtocolName is TCP, UDP or SCTP, as Kubernetes spells them.
func ProtocolName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "TCP"
	case ProtoUDP:
		return "UDP"
	case ProtoSCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", p)
}

func (f Frontend) String() string {
	s := fmt.Sprintf("%s/%s", netip.AddrPortFrom(f.Address, f.Port), ProtocolName(f.Protocol))
	if f.Scope == ScopeInternal {
		s += "/i"
	}
	return s
}

// Service is one frontend as the datapath holds it: the backends new
// connections are spread over, in slot order, and how replies are
// translated back (RevNATIndex names the frontend's address and port).
type Service struct {
	Frontend    Frontend
	Backends    []BackendID
	RevNATIndex uint16
	Flags       LBFlags
	// AffinityTimeout is how long, in seconds, a client sticks to its
	// backend with LBAffinity.
	AffinityTimeout uint32
	// Maglev is the external scope's Maglev table with LBMaglev: as many
	// backend ids as the datapath's tables have slots, each one of
	// Backends. Nil with no backends.
	Maglev []BackendID
}

// Validate says what is wrong with s, naming the field.
func (s Service) Validate() error {
	f := s.Frontend
	switch {
	case !f.Address.Is4():
		return fmt.Errorf("service %s: only IPv4 frontends are supported", f)
	case f.Port == 0:
		return fmt.Errorf("service %s: port 0", f)
	case f.Protocol != ProtoTCP && f.Protocol != ProtoUDP && f.Protocol != ProtoSCTP:
		return fmt.Errorf("service %s: protocol %d: want TCP, UDP or SCTP", f, f.Protocol)
	case f.Scope != ScopeExternal && f.Scope != ScopeInternal:
		return fmt.Errorf("service %s: scope %d", f, f.Scope)
	case f.Address == AnyNode && s.Flags&LBNodePort == 0:
		return fmt.Errorf("service %s: the unspecified address serves NodePorts only", f)
	case s.RevNATIndex == 0:
		return fmt.Errorf("service %s: reverse NAT index 0 is reserved", f)
	case len(s.Backends) > 0xffff:
		return fmt.Errorf("service %s: %d backends, at most 65535", f, len(s.Backends))
	}
	for i, b := range s.Backends {
		if b == 0 {
			return fmt.Errorf("service %s: slot %d: backend id 0", f, i+1)
		}
	}
	switch {
	case s.Maglev != nil && (s.Flags&LBMaglev == 0 || f.Scope != ScopeExternal):
		return fmt.Errorf("service %s: a Maglev table without the maglev flag in the external scope", f)
	case s.Flags&LBMaglev != 0 && (s.Maglev == nil) != (len(s.Backends) == 0):
		return fmt.Errorf("service %s: %d backends and a Maglev table of %d", f, len(s.Backends), len(s.Maglev))
	}
	in := make(map[BackendID]bool, len(s.Backends))
	for _, b := range s.Backends {
		in[b] = true
	}
	for i, b := range s.Maglev {
		if !in[b] {
			return fmt.Errorf("service %s: Maglev slot %d: backend %d is not one of its backends", f, i, b)
		}
	}
	return nil
}

// RevNAT is what replies of a frontend's connections are translated back to.
type RevNAT struct {
	Index   uint16
	Address netip.Addr
	Port    uint16
}

// SourceRange is one prefix of the clients a frontend with LBSourceRange
// admits; the frontend is named by its reverse NAT index, which no other
// frontend has.
type SourceRange struct {
	RevNATIndex uint16
	Prefix      netip.Prefix
}

// Validate says what is wrong with r.
func (r SourceRange) Validate() error {
	switch {
	case r.RevNATIndex == 0:
		return fmt.Errorf("source range %s: reverse NAT index 0 is reserved", r.Prefix)
	case !r.Prefix.IsValid() || !r.Prefix.Addr().Is4():
		return fmt.Errorf("source range %s of %d: only IPv4 prefixes are supported", r.Prefix, r.RevNATIndex)
	case r.Prefix != r.Prefix.Masked():
		return fmt.Errorf("source range %s of %d: bits beyond the prefix length are set", r.Prefix, r.RevNATIndex)
	}
	return nil
}

func (r SourceRange) String() string { return fmt.Sprintf("%d %s", r.RevNATIndex, r.Prefix) }
