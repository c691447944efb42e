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
	Traces        spec.Traces
	// Masquerade translates pod traffic to the world to NodeIPv4.
	Masquerade bool
	// LegacyRouting hands routed pod traffic to the stack rather than
	// redirecting it after a FIB lookup.
	LegacyRouting bool
	// MasqueradePorts are the ports source translation picks from: the
	// masquerading of pods, and the SNAT of flows from outside that a
	// NodePort sends to another node's backend. The zero range means
	// MasqueradePortRange(DefaultEphemeralPorts, DefaultNodePorts).
	MasqueradePorts PortRange
	// NodePorts is the NodePort range: a pod's packet to a port in it may
	// be for a NodePort at another node's address. Zero: DefaultNodePorts.
	NodePorts PortRange
	// MaglevSeed seeds the hash of flows to frontends with Maglev tables:
	// the cluster's, so that every node hashes a flow alike.
	MaglevSeed uint32
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

// nodeVars are the constants every program family shares, picked from an
// object's generated variable specs by field: a constant renamed in C is
// a compile error in the loader, not a load error at run time.
type nodeVars struct {
	nodeIPv4, tunnelMode, tunnelIfindex, trace, aggregation, reportFlags, reportInterval,
	masquerade, legacyRouting, natPortMin, natPortMax, nodePortMin, nodePortMax, maglevSeed *ebpf.VariableSpec
}

func (c NodeConstants) set(v nodeVars) error {
	ports := c.MasqueradePorts
	if ports == (PortRange{}) {
		ports = MasqueradePortRange(DefaultEphemeralPorts, DefaultNodePorts)
	}
	nodePorts := c.NodePorts
	if nodePorts == (PortRange{}) {
		nodePorts = DefaultNodePorts
	}
	return setAll(
		setVar(v.nodeIPv4, as4(c.NodeIPv4)),
		setVar(v.tunnelMode, uint8(c.Mode)),
		setVar(v.tunnelIfindex, uint32(c.TunnelIfindex)),
		setVar(v.trace, boolU8(c.Traces.Enabled)),
		setVar(v.aggregation, uint8(c.Traces.Aggregation)),
		setVar(v.reportFlags, c.Traces.ReportFlags),
		setVar(v.reportInterval, c.Traces.ReportSeconds()),
		setVar(v.masquerade, boolU8(c.Masquerade)),
		setVar(v.legacyRouting, boolU8(c.LegacyRouting)),
		setVar(v.natPortMin, ports.Min),
		setVar(v.natPortMax, ports.Max),
		setVar(v.nodePortMin, nodePorts.Min),
		setVar(v.nodePortMax, nodePorts.Max),
		setVar(v.maglevSeed, c.MaglevSeed),
	)
}

// setVar is a deferred VariableSpec.Set, so that a list of them reads as
// a table of constant and value.
func setVar(vs *ebpf.VariableSpec, v any) func() error {
	return func() error {
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set constant %s: %w", vs.Name, err)
		}
		return nil
	}
}

func setAll(sets ...func() error) error {
	for _, set := range sets {
		if err := set(); err != nil {
			return err
		}
	}
	return nil
}

// LoadEndpointPrograms loads the endpoint template with c substituted,
// against the node's maps. No compiler runs: only constants change.
func LoadEndpointPrograms(maps *Maps, c EndpointConstants) (*EndpointPrograms, error) {
	if !c.IPv4.Is4() {
		return nil, fmt.Errorf("endpoint %d: IPv4 address required", c.ID)
	}
	cs, err := loadLxc()
	if err != nil {
		return nil, fmt.Errorf("load lxc spec: %w", err)
	}
	var vs lxcVariableSpecs
	if err := cs.Assign(&vs); err != nil {
		return nil, fmt.Errorf("lxc constants: %w", err)
	}
	err = c.NodeConstants.set(nodeVars{
		nodeIPv4: vs.NODE_IPV4, tunnelMode: vs.TUNNEL_MODE, tunnelIfindex: vs.TUNNEL_IFINDEX,
		trace: vs.TRACE_ENABLED, aggregation: vs.MONITOR_AGGREGATION, reportFlags: vs.CT_REPORT_FLAGS,
		reportInterval: vs.CT_REPORT_INTERVAL, masquerade: vs.MASQUERADE, legacyRouting: vs.LEGACY_ROUTING,
		natPortMin: vs.NAT_PORT_MIN, natPortMax: vs.NAT_PORT_MAX,
		nodePortMin: vs.NODEPORT_MIN, nodePortMax: vs.NODEPORT_MAX, maglevSeed: vs.LB_MAGLEV_SEED,
	})
	if err == nil {
		err = setAll(
			setVar(vs.ENDPOINT_ID, c.ID),
			setVar(vs.ENDPOINT_IDENTITY, uint32(c.Identity)),
			setVar(vs.ENDPOINT_IPV4, as4(c.IPv4)),
			setVar(vs.POLICY_INGRESS, boolU8(c.PolicyIngress)),
			setVar(vs.POLICY_EGRESS, boolU8(c.PolicyEgress)),
			setVar(vs.NETKIT, boolU8(c.Netkit)),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("endpoint %d: %w", c.ID, err)
	}
	var objs lxcPrograms
	opts, err := maps.useIn(cs)
	if err != nil {
		return nil, fmt.Errorf("endpoint %d: %w", c.ID, err)
	}
	if err := cs.LoadAndAssign(&objs, opts); err != nil {
		return nil, fmt.Errorf("load endpoint %d programs: %w", c.ID, err)
	}
	return &EndpointPrograms{FromContainer: objs.CilFromContainer, ToContainer: objs.CilToContainer}, nil
}

// LoadNodePrograms loads the node's device programs against its maps.
func LoadNodePrograms(maps *Maps, c NodeConstants) (*NodePrograms, error) {
	cs, err := loadNode()
	if err != nil {
		return nil, fmt.Errorf("load node spec: %w", err)
	}
	var vs nodeVariableSpecs
	if err := cs.Assign(&vs); err != nil {
		return nil, fmt.Errorf("node constants: %w", err)
	}
	if err := c.set(nodeVars{
		nodeIPv4: vs.NODE_IPV4, tunnelMode: vs.TUNNEL_MODE, tunnelIfindex: vs.TUNNEL_IFINDEX,
		trace: vs.TRACE_ENABLED, aggregation: vs.MONITOR_AGGREGATION, reportFlags: vs.CT_REPORT_FLAGS,
		reportInterval: vs.CT_REPORT_INTERVAL, masquerade: vs.MASQUERADE, legacyRouting: vs.LEGACY_ROUTING,
		natPortMin: vs.NAT_PORT_MIN, natPortMax: vs.NAT_PORT_MAX,
		nodePortMin: vs.NODEPORT_MIN, nodePortMax: vs.NODEPORT_MAX, maglevSeed: vs.LB_MAGLEV_SEED,
	}); err != nil {
		return nil, fmt.Errorf("node programs: %w", err)
	}
	var objs nodePrograms
	opts, err := maps.useIn(cs)
	if err != nil {
		return nil, fmt.Errorf("node programs: %w", err)
	}
	if err := cs.LoadAndAssign(&objs, opts); err != nil {
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
