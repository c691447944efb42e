package datapath

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// NodeConstants are the load-time constants every program family shares.
type NodeConstants struct {
	NodeIPv4      netip.Addr
	Mode          spec.RoutingMode
	TunnelIfindex int
	Trace         bool
	// Masquerade translates pod traffic to the world to NodeIPv4.
	Masquerade bool
	// LegacyRouting hands routed pod traffic to the stack rather than
	// redirecting it after a FIB lookup.
	LegacyRouting bool
	// MasqueradePorts are the ports masquerading picks from; the zero
	// range means MasqueradePortRange(DefaultEphemeralPorts).
	MasqueradePorts PortRange
}

// EndpointConstants are an endpoint program's load-time constants.
type EndpointConstants struct {
	NodeConstants
	ID            uint16
	Identity      identity.NumericIdentity
	IPv4          netip.Addr
	PolicyIngress bool
	PolicyEgress  bool
	// Netkit says the programs run on a netkit pair: from-container as
	// the pod transmits, where bpf_redirect_peer is not available.
	Netkit bool
}

// EndpointPrograms are one endpoint's loaded programs.
type EndpointPrograms struct {
	FromContainer *ebpf.Program
	ToContainer   *ebpf.Program
}

// Close releases the programs; attached links keep them alive.
func (p *EndpointPrograms) Close() error {
	return errors.Join(p.FromContainer.Close(), p.ToContainer.Close())
}

// NodePrograms are a node's loaded device programs.
type NodePrograms struct {
	FromNetdev  *ebpf.Program
	ToNetdev    *ebpf.Program
	FromOverlay *ebpf.Program
	ToOverlay   *ebpf.Program
}

// Close releases the programs; attached links keep them alive.
func (p *NodePrograms) Close() error {
	return errors.Join(p.FromNetdev.Close(), p.ToNetdev.Close(), p.FromOverlay.Close(), p.ToOverlay.Close())
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func setConstants(spec *ebpf.CollectionSpec, values map[string]any) error {
	for name, v := range values {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("constant %s: not in object", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set constant %s: %w", name, err)
		}
	}
	return nil
}

func (c NodeConstants) values() map[string]any {
	ports := c.MasqueradePorts
	if ports == (PortRange{}) {
		ports = MasqueradePortRange(DefaultEphemeralPorts)
	}
	return map[string]any{
		"NODE_IPV4":      as4(c.NodeIPv4),
		"TUNNEL_MODE":    uint8(c.Mode),
		"TUNNEL_IFINDEX": uint32(c.TunnelIfindex),
		"TRACE_ENABLED":  boolU8(c.Trace),
		"MASQUERADE":     boolU8(c.Masquerade),
		"LEGACY_ROUTING": boolU8(c.LegacyRouting),
		"NAT_PORT_MIN":   ports.Min,
		"NAT_PORT_MAX":   ports.Max,
	}
}

// LoadEndpointPrograms loads the endpoint template with c substituted,
// against the node's maps. No compiler runs: only constants change.
func LoadEndpointPrograms(maps *Maps, c EndpointConstants) (*EndpointPrograms, error) {
	if !c.IPv4.Is4() {
		return nil, fmt.Errorf("endpoint %d: IPv4 address required", c.ID)
	}
	spec, err := loadLxc()
	if err != nil {
		return nil, fmt.Errorf("load lxc spec: %w", err)
	}
	vals := c.NodeConstants.values()
	vals["ENDPOINT_ID"] = c.ID
	vals["ENDPOINT_IDENTITY"] = c.Identity
	vals["ENDPOINT_IPV4"] = as4(c.IPv4)
	vals["POLICY_INGRESS"] = boolU8(c.PolicyIngress)
	vals["POLICY_EGRESS"] = boolU8(c.PolicyEgress)
	vals["NETKIT"] = boolU8(c.Netkit)
	if err := setConstants(spec, vals); err != nil {
		return nil, err
	}
	var objs lxcPrograms
	opts := &ebpf.CollectionOptions{MapReplacements: maps.replacements()}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		return nil, fmt.Errorf("load endpoint %d programs: %w", c.ID, err)
	}
	return &EndpointPrograms{FromContainer: objs.CilFromContainer, ToContainer: objs.CilToContainer}, nil
}

// LoadNodePrograms loads the node's device programs against its maps.
func LoadNodePrograms(maps *Maps, c NodeConstants) (*NodePrograms, error) {
	spec, err := loadNode()
	if err != nil {
		return nil, fmt.Errorf("load node spec: %w", err)
	}
	if err := setConstants(spec, c.values()); err != nil {
		return nil, err
	}
	var objs nodePrograms
	opts := &ebpf.CollectionOptions{MapReplacements: maps.replacements()}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		return nil, fmt.Errorf("load node programs: %w", err)
	}
	return &NodePrograms{FromNetdev: objs.CilFromNetdev, ToNetdev: objs.CilToNetdev,
		FromOverlay: objs.CilFromOverlay, ToOverlay: objs.CilToOverlay}, nil
}

// as4 is the address in network order, or zeros when there is none.
func as4(a netip.Addr) [4]byte {
	if !a.Is4() {
		return [4]byte{}
	}
	return a.As4()
}
