package datapath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cilium-go/cilium/internal/datapath/spec"
)

// UpsertEndpoint loads the endpoint's programs with its constants,
// attaches them to its host device (replacing older ones atomically),
// publishes it in the endpoint map and routes its address to it. On a
// veth, from-container runs at the host side's ingress and to-container
// at its egress; on a netkit pair, from-container runs as the pod's side
// transmits and to-container as the node's side does. The programs load
// without the node's lock, so that the other reconcilers do not wait for
// the verifier; attaching and publishing take the lock.
func (n *Node) UpsertEndpoint(ep spec.Endpoint) error {
	t, err := n.endpointTarget(ep)
	if err != nil {
		return err
	}
	progs, err := LoadEndpointPrograms(t.maps, EndpointConstants{
		NodeConstants: t.consts, ID: ep.ID, Identity: ep.Identity, IPv4: ep.IPv4,
		PolicyIngress: ep.PolicyIngress, PolicyEgress: ep.PolicyEgress, Netkit: t.netkit,
	})
	n.loads.RUnlock()
	if err != nil {
		return err
	}
	defer progs.Close()

	n.mu.Lock()
	defer n.mu.Unlock()
	// Closed, or closed and started again, while the programs loaded:
	// they would use maps that are gone.
	maps, host := t.maps, t.host
	if n.maps.Load() != maps {
		return fmt.Errorf("endpoint %d: %w", ep.ID, ErrNotStarted)
	}
	idx := host.Attrs().Index
	if err := n.attach(n.endpointPin(ep.ID, "ingress"), idx, progs.FromContainer, t.fromAt); err != nil {
		return fmt.Errorf("endpoint %d: %w", ep.ID, err)
	}
	if err := n.attach(n.endpointPin(ep.ID, "egress"), idx, progs.ToContainer, t.toAt); err != nil {
		return fmt.Errorf("endpoint %d: %w", ep.ID, err)
	}
	if err := maps.UpsertEndpoint(EndpointEntry{
		ID: ep.ID, Identity: ep.Identity, IPv4: ep.IPv4, MAC: ep.MAC,
		HostMAC: host.Attrs().HardwareAddr, HostIfindex: idx,
		PolicyIngress: ep.PolicyIngress, PolicyEgress: ep.PolicyEgress,
	}); err != nil {
		return err
	}
	route := &netlink.Route{LinkIndex: idx, Dst: hostPrefix(ep.IPv4), Scope: netlink.SCOPE_LINK,
		Protocol: RouteProtocol}
	if err := n.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("route to endpoint %d: %w", ep.ID, err)
	}
	n.log.Debug("endpoint programmed", "id", ep.ID, "identity", ep.Identity, "ipv4", ep.IPv4)
	return nil
}

// endpointTarget is what loading and attaching an endpoint's programs
// needs from the node.
type endpointTarget struct {
	maps         *Maps
	consts       NodeConstants
	host         netlink.Link
	netkit       bool
	fromAt, toAt ebpf.AttachType
}

// endpointTarget reads it under mu, and returns with the loads lock held
// for reading (taken under mu: Close cannot come between), which the
// caller lets go once the programs are loaded.
func (n *Node) endpointTarget(ep spec.Endpoint) (endpointTarget, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := endpointTarget{maps: n.maps.Load(), consts: n.consts, fromAt: ebpf.AttachTCXIngress, toAt: ebpf.AttachTCXEgress}
	if t.maps == nil {
		return t, fmt.Errorf("endpoint %d: %w", ep.ID, ErrNotStarted)
	}
	host, err := n.nl.LinkByName(ep.HostDevice)
	if err != nil {
		return t, fmt.Errorf("endpoint %d device %s: %w", ep.ID, ep.HostDevice, err)
	}
	t.host = host
	if nk, ok := host.(*netlink.Netkit); ok {
		if !nk.IsPrimary() {
			return t, fmt.Errorf("endpoint %d device %s: a netkit peer, want the primary", ep.ID, ep.HostDevice)
		}
		t.netkit, t.fromAt, t.toAt = true, ebpf.AttachNetkitPeer, ebpf.AttachNetkitPrimary
	}
	n.loads.RLock()
	return t, nil
}

// DeleteEndpoint detaches the endpoint's programs and forgets it and its
// policy. The host device may be gone already (CNI DEL removed it).
func (n *Node) DeleteEndpoint(ep spec.Endpoint) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	maps := n.maps.Load()
	if maps == nil {
		return fmt.Errorf("endpoint %d: %w", ep.ID, ErrNotStarted)
	}
	return n.deleteEndpoint(maps, ep)
}

func (n *Node) deleteEndpoint(maps *Maps, ep spec.Endpoint) error {
	errs := []error{
		n.detach(n.endpointPin(ep.ID, "ingress"), ep.HostDevice, ebpf.AttachTCXIngress),
		n.detach(n.endpointPin(ep.ID, "egress"), ep.HostDevice, ebpf.AttachTCXEgress),
		maps.DeleteEndpoint(ep.IPv4),
		maps.DeletePolicy(ep.ID),
	}
	// The scope must match the route's, or the kernel finds nothing; the
	// protocol makes it delete only a route this node made.
	route := &netlink.Route{Dst: hostPrefix(ep.IPv4), Scope: netlink.SCOPE_LINK, Protocol: RouteProtocol}
	if err := n.nl.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) {
		errs = append(errs, fmt.Errorf("delete route to endpoint %d: %w", ep.ID, err))
	}
	return errors.Join(errs...)
}

// PruneEndpoints forgets every endpoint that is not in keep: their
// links, map entries and policy. An agent calls it after a restart, once
// it has programmed the endpoints it still has.
func (n *Node) PruneEndpoints(keep []spec.Endpoint) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	maps := n.maps.Load()
	if maps == nil {
		return fmt.Errorf("prune endpoints: %w", ErrNotStarted)
	}
	kept := map[uint16]bool{}
	for _, ep := range keep {
		kept[ep.ID] = true
	}
	var stale []spec.Endpoint
	var k EndpointKey
	var v EndpointInfo
	it := maps.Endpoints.Iterate()
	for it.Next(&k, &v) {
		if !kept[v.EpId] && k.Family == afInet {
			stale = append(stale, spec.Endpoint{ID: v.EpId, IPv4: netip.AddrFrom4([4]byte(k.Addr[:4]))})
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate endpoints: %w", err)
	}
	var errs []error
	for _, ep := range stale {
		if l, err := n.nl.LinkByIndex(int(endpointIfindex(maps, ep.IPv4))); err == nil {
			ep.HostDevice = l.Attrs().Name
		}
		errs = append(errs, n.deleteEndpoint(maps, ep))
	}
	if !n.cfg.LegacyTC {
		errs = append(errs, n.pruneLinkPins(kept))
	}
	return errors.Join(errs...)
}

func endpointIfindex(maps *Maps, a netip.Addr) uint32 {
	k, err := endpointKey4(a)
	if err != nil {
		return 0
	}
	var v EndpointInfo
	if maps.Endpoints.Lookup(&k, &v) != nil {
		return 0
	}
	return v.Ifindex
}

// pruneLinkPins removes endpoint links whose endpoint is not kept, even
// those whose map entry is already gone.
func (n *Node) pruneLinkPins(kept map[uint16]bool) error {
	entries, err := os.ReadDir(n.linksDir())
	if err != nil {
		return fmt.Errorf("read %s: %w", n.linksDir(), err)
	}
	var errs []error
	for _, e := range entries {
		var id uint16
		var dir string
		if _, err := fmt.Sscanf(e.Name(), "lxc_%d_%s", &id, &dir); err != nil || kept[id] {
			continue
		}
		errs = append(errs, detachTCX(filepath.Join(n.linksDir(), e.Name())))
	}
	return errors.Join(errs...)
}

func (n *Node) endpointPin(id uint16, dir string) string {
	return filepath.Join(n.linksDir(), fmt.Sprintf("lxc_%d_%s", id, dir))
}

func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}
