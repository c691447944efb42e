// Package spec describes what the datapath should hold: endpoints,
// ipcache entries, routes to other nodes, policy entries and the modes the
// node runs in; and what it reports: the events of its ring buffer, once
// internal/datapath has decoded them. These are plain values with no
// kernel access, as cilium/ebpf's MapSpec is to its Map: the control plane
// computes them, keeps them in statedb tables, and internal/datapath turns
// them into kernel objects. Packages that only describe desired state, or
// read what the datapath reported, import this one, never
// internal/datapath.
package spec

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium-go/cilium/pkg/identity"
)

// Endpoint is a local pod as the datapath programs it. The device pair
// exists already (the CNI plugin made it); HostDevice is its end in the
// node: a veth, or a netkit primary.
type Endpoint struct {
	ID            uint16
	Identity      identity.NumericIdentity
	IPv4          netip.Addr
	MAC           net.HardwareAddr
	HostDevice    string
	PolicyIngress bool
	PolicyEgress  bool
}

// IPCacheEntry is what the datapath knows of an address: its identity and,
// for a pod on another node in tunnel mode, the node to tunnel it to.
type IPCacheEntry struct {
	Identity       identity.NumericIdentity
	TunnelEndpoint netip.Addr // invalid when not behind a tunnel
	// CIDRIdentity is, for a pod's or node's address inside a prefix of
	// a NetworkPolicy ipBlock, the CIDR identity that policy judges it
	// by beside Identity; 0 for none.
	CIDRIdentity identity.NumericIdentity
}

// RemoteNode is another node of the cluster, whose pod CIDR the node
// routes to it.
type RemoteNode struct {
	IPv4    netip.Addr
	PodCIDR netip.Prefix
}

// RoutingMode says how pod traffic crosses nodes.
type RoutingMode uint8

const (
	// Native routes pod traffic between nodes by the kernel's routes.
	Native RoutingMode = 0
	// Tunnel encapsulates pod traffic in VXLAN with the source identity as VNI.
	Tunnel RoutingMode = 1
)

// ParseRoutingMode reads the names the --routing-mode flag takes.
func ParseRoutingMode(s string) (RoutingMode, error) {
	switch s {
	case "tunnel":
		return Tunnel, nil
	case "native":
		return Native, nil
	}
	return 0, fmt.Errorf("unknown routing mode %q (want tunnel or native)", s)
}

func (m RoutingMode) String() string {
	switch m {
	case Native:
		return "native"
	case Tunnel:
		return "tunnel"
	}
	return fmt.Sprintf("routing-mode(%d)", uint8(m))
}
